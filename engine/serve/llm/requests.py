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
from engine.serve.traffic.schedule import Schedule, arrivals_within, cut_note


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


MOONCAKE_BLOCK = 512  # tokens per hash id in Mooncake's traces
SHARED_BASE = 1 << 40  # generated block keys: shared prefixes below, each prompt's own above


@dataclass(frozen=True)
class LLMWorkload:
    """Requests in arrival order: time (s), prompt tokens, output tokens; and, for prefix
    caching, each prompt's blocks of `block_tokens` tokens as keys that stand for the block
    and all before it (prefix_cache.py), or None."""

    arrivals: np.ndarray  # float64
    prompt: np.ndarray  # int64
    output: np.ndarray  # int64
    blocks: tuple[tuple[int, ...], ...] | None = None
    block_tokens: int = 0

    def __len__(self) -> int:
        return int(self.arrivals.size)

    def within(self, duration_s: float, what: str) -> tuple[LLMWorkload, str]:
        """The requests a real run serves: those due within `duration_s`, and the line that
        says what was cut ('' when nothing was): a trace's first N requests can lie
        centuries apart, and nothing may wait for them past --duration."""
        n = arrivals_within(self.arrivals, duration_s, what)
        if n == len(self):
            return self, ""
        blocks = self.blocks[:n] if self.blocks is not None else None
        cut = LLMWorkload(self.arrivals[:n], self.prompt[:n], self.output[:n], blocks,
                          self.block_tokens)  # fmt: skip
        return cut, cut_note(self.arrivals, n, duration_s, what)


@dataclass(frozen=True)
class SharedPrefix:
    """`--shared-prefix GROUPS,TOKENS`: every prompt begins with one of GROUPS prefixes of
    TOKENS tokens (a system prompt, a few-shot preamble), chosen at random per request; the
    rest of the prompt is its own. The prefix counts in the prompt's length."""

    groups: int
    tokens: int

    @classmethod
    def parse(cls, text: str) -> SharedPrefix:
        try:
            groups, tokens = (int(v) for v in str(text).split(","))
        except ValueError:
            raise ConfigError(
                f"--shared-prefix {text!r}: expected GROUPS,TOKENS (e.g. 4,256)"
            ) from None
        if not (1 <= groups <= 1_000_000 and 1 <= tokens <= 1 << 20):
            raise ConfigError(f"--shared-prefix {text!r}: GROUPS 1 to 1,000,000, TOKENS 1 to "
                              f"{1 << 20:,}")  # fmt: skip
        return cls(groups, tokens)

    def blocks(self, prompts: np.ndarray, block: int, seed: int) -> tuple[tuple[int, ...], ...]:
        """Each prompt's full blocks as keys: its group's shared blocks (the same keys for
        every prompt of the group), then blocks of its own that no other prompt has."""
        rng = np.random.default_rng([seed, 0x9F])
        group = rng.integers(0, self.groups, prompts.size)
        shared = self.tokens // block
        out = []
        for rid, (n, g) in enumerate(zip(prompts.tolist(), group.tolist(), strict=True)):
            full = int(n) // block
            mine = min(shared, full)
            own = SHARED_BASE + rid * ((1 << 20) // max(block, 1) + 1)
            out.append(tuple(g * shared + i for i in range(mine))
                       + tuple(own + i for i in range(full - mine)))  # fmt: skip
        return tuple(out)


def make_workload(
    schedule: Schedule,
    prompt: LengthSpec,
    output: LengthSpec,
    seed: int = 0,
    prompt_from_trace: bool = False,
    shared: SharedPrefix | None = None,
    block: int = 16,
) -> LLMWorkload:
    """Lengths drawn with their own seeded generator (the schedule's is left alone);
    `prompt_from_trace` takes the prompt lengths from a trace's size column; an LLM trace
    (Azure, BurstGPT, Mooncake) gives both lengths, request by request, and Mooncake's its
    prompt blocks; else `shared` prefixes give blocks of `block` tokens."""
    rng = np.random.default_rng([seed, 0x11A])
    n = len(schedule)
    prompts = prompt.sample(rng, n)
    if prompt_from_trace and schedule.sizes is not None:
        prompts = schedule.sizes.astype(np.int64)
    outputs = output.sample(rng, n)
    if prompt_from_trace and schedule.outputs is not None:  # an LLM trace: its own outputs
        outputs = schedule.outputs.astype(np.int64)
    times = schedule.times.astype(np.float64)
    if prompt_from_trace and schedule.hash_ids is not None:  # Mooncake: its prompt blocks
        return LLMWorkload(times, prompts, outputs, schedule.hash_ids, MOONCAKE_BLOCK)
    if shared is not None:
        return LLMWorkload(times, prompts, outputs, shared.blocks(prompts, block, seed), block)
    return LLMWorkload(times, prompts, outputs)
