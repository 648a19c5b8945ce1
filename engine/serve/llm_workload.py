"""LLM requests: arrival times from the serving lab's traffic schedules, each with a
prompt length and an output length, fixed or drawn (seeded) from a distribution.

Length specs: `L` (every request), `LO-HI` (uniform whole numbers, both included),
`lognormal:MEDIAN,SIGMA[,MAX]` (rounded, clipped to 1..MAX; MAX defaults to 4 x MEDIAN).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.errors import ConfigError
from engine.serve.traffic import Schedule


@dataclass(frozen=True)
class LengthSpec:
    kind: str  # "fixed" | "uniform" | "lognormal"
    text: str
    lo: int  # the smallest length it gives
    hi: int  # the largest
    median: float = 0.0
    sigma: float = 0.0

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            return np.full(n, self.hi, np.int64)
        if self.kind == "uniform":
            return rng.integers(self.lo, self.hi + 1, size=n, dtype=np.int64)
        raw = rng.lognormal(math.log(self.median), self.sigma, size=n)
        return np.clip(np.rint(raw), self.lo, self.hi).astype(np.int64)

    def mean(self) -> float:
        if self.kind == "fixed":
            return float(self.hi)
        if self.kind == "uniform":
            return 0.5 * (self.lo + self.hi)
        return min(self.median * math.exp(self.sigma**2 / 2), float(self.hi))


def parse_length(text: str, what: str) -> LengthSpec:
    """A length spec from its text; a ConfigError naming the flag otherwise."""
    s = str(text).strip()
    try:
        if s.lower().startswith("lognormal:"):
            parts = [float(v) for v in s.split(":", 1)[1].split(",")]
            if len(parts) not in (2, 3):
                raise ValueError
            median, sigma = parts[0], parts[1]
            top = parts[2] if len(parts) == 3 else 4 * median
            if not (median >= 1 and sigma > 0 and top >= median and math.isfinite(top + sigma)):
                raise ConfigError(f"{what} {s!r}: lognormal needs MEDIAN >= 1, SIGMA > 0, "
                                  "MAX >= MEDIAN")  # fmt: skip
            return LengthSpec("lognormal", s, 1, int(top), median, sigma)
        if "-" in s:
            lo_text, hi_text = s.split("-", 1)
            lo, hi = int(lo_text), int(hi_text)
            if lo < 1 or hi < lo:
                raise ConfigError(f"{what} {s!r}: a range LO-HI needs 1 <= LO <= HI")
            return LengthSpec("uniform", s, lo, hi)
        n = int(s)
    except ValueError:
        raise ConfigError(
            f"{what} {s!r}: expected N, LO-HI or lognormal:MEDIAN,SIGMA[,MAX]"
        ) from None
    if n < 1:
        raise ConfigError(f"{what} must be at least 1, got {n}")
    return LengthSpec("fixed", s, n, n)


@dataclass(frozen=True)
class LLMWorkload:
    """Requests in arrival order: time (s), prompt tokens, output tokens."""

    arrivals: np.ndarray  # float64
    prompt: np.ndarray  # int64
    output: np.ndarray  # int64

    def __len__(self) -> int:
        return int(self.arrivals.size)


def make_workload(
    schedule: Schedule,
    prompt: LengthSpec,
    output: LengthSpec,
    seed: int = 0,
    prompt_from_trace: bool = False,
) -> LLMWorkload:
    """Lengths drawn with their own seeded generator (the schedule's is left alone);
    `prompt_from_trace` takes the prompt lengths from a trace's size column; an LLM trace
    (Azure, BurstGPT, Mooncake) gives both lengths, request by request."""
    rng = np.random.default_rng([seed, 0x11A])
    n = len(schedule)
    prompts = prompt.sample(rng, n)
    if prompt_from_trace and schedule.sizes is not None:
        prompts = schedule.sizes.astype(np.int64)
    outputs = output.sample(rng, n)
    if prompt_from_trace and schedule.outputs is not None:  # an LLM trace: its own outputs
        outputs = schedule.outputs.astype(np.int64)
    return LLMWorkload(schedule.times.astype(np.float64), prompts, outputs)
