"""One generation: the prompt's prefill, then one decode step per new token, each timed
from the call to the token in hand (the forward pass and the choice of the token)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from engine.backends.genai.decoder import Decoder
from engine.errors import ConfigError

MAX_TEMPERATURE = 100.0  # far past uniform sampling among the top k


@dataclass(frozen=True)
class Sampling:
    """Greedy when `temperature` is 0; else sampled (top-k) with a seeded generator."""

    temperature: float = 0.0
    top_k: int = 50
    seed: int = 0

    def __post_init__(self) -> None:
        if not (0.0 <= self.temperature <= MAX_TEMPERATURE):  # nan fails too
            raise ConfigError(
                f"temperature must be a finite number from 0 (greedy) to {MAX_TEMPERATURE:g}, "
                f"got {self.temperature:g}"
            )
        if not 0 <= self.seed < 2**32:
            raise ConfigError(f"seed must be from 0 to 2**32 - 1, got {self.seed}")

    def describe(self) -> str:
        if self.temperature <= 0:
            return "greedy"
        return f"temperature {self.temperature:g}, top-k {self.top_k}, seed {self.seed}"

    def chooser(self) -> Chooser:
        return Chooser(self, np.random.default_rng(self.seed))


@dataclass
class Chooser:
    sampling: Sampling
    rng: np.random.Generator

    def __call__(self, logits: np.ndarray) -> np.ndarray:
        """The next token of each sequence, [batch] int64."""
        if self.sampling.temperature <= 0:
            return np.asarray(logits.argmax(axis=-1), np.int64)
        k = min(self.sampling.top_k, logits.shape[-1])
        top = np.argpartition(-logits, k - 1, axis=-1)[:, :k]
        scores = np.take_along_axis(logits, top, axis=-1).astype(np.float64)
        # the best score subtracted first: a tiny temperature sends the others to -inf
        # (weight 0), never inf - inf = nan
        with np.errstate(over="ignore"):
            scaled = (scores - scores.max(axis=-1, keepdims=True)) / self.sampling.temperature
        p = np.exp(scaled)
        p /= p.sum(axis=-1, keepdims=True)
        picks = [self.rng.choice(k, p=row) for row in p]
        return np.asarray([top[i, j] for i, j in enumerate(picks)], np.int64)


@dataclass
class Generation:
    """Tokens [batch, n] and the time to each: `ttft_s` to the first (prefill),
    `step_s[i]` for the (i+2)th (decode)."""

    tokens: np.ndarray
    ttft_s: float
    step_s: list[float] = field(default_factory=list)

    @property
    def total_s(self) -> float:
        return self.ttft_s + sum(self.step_s)


def generate(
    decoder: Decoder,
    prompt: np.ndarray,
    new_tokens: int,
    sampling: Sampling = Sampling(),
    eos: int | None = None,
) -> Generation:
    """`new_tokens` tokens after `prompt` ([batch, length]); stops early only when `eos`
    is given and every sequence has produced it."""
    choose = sampling.chooser()
    t0 = time.perf_counter()
    token = choose(decoder.prefill(prompt))
    ttft = time.perf_counter() - t0
    out, steps = [token], []
    done = token == eos if eos is not None else None
    for _ in range(new_tokens - 1):
        if done is not None and bool(done.all()):
            break
        t0 = time.perf_counter()
        token = choose(decoder.step(token))
        steps.append(time.perf_counter() - t0)
        out.append(token)
        if done is not None:
            done |= token == eos
    return Generation(np.stack(out, axis=1), ttft, steps)
