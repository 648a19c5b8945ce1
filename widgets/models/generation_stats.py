"""The live numbers of a generating model (Qt-free): the last generations' time to first
token and time per output token, as rolling percentiles from the raw passes with their
counts, and how a generation's time splits between prefill and decode."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

WINDOW = 200  # generations in the rolling figures


@dataclass(frozen=True)
class GenerationFigures:
    generations: int  # in the window
    ttft_p50_ms: float
    ttft_p99_ms: float
    tpot_p50_ms: float
    tpot_p99_ms: float
    tpot_count: int
    prefill_share: float  # of a generation's time (mean TTFT / mean total)
    decode_tokens_per_s: float  # sequences x tokens per second while decoding (p50 step)
    prefill_tokens_per_s: float


class GenerationStats:
    def __init__(self, window: int = WINDOW) -> None:
        self.window = window
        self._steps: deque[np.ndarray] = deque(maxlen=window)
        self.total = 0  # generations seen since the last reset
        self.prompt_len = 0
        self.batch = 1

    def reset(self, prompt_len: int = 0, batch: int = 1) -> None:
        """A new run (a config change): figures from its generations only."""
        self._steps.clear()
        self.total = 0
        self.prompt_len, self.batch = prompt_len, max(1, batch)

    def add(self, steps_ns: np.ndarray) -> None:
        """One generation's passes: [time to first token, decode step, ...] in ns."""
        if steps_ns.size:
            self._steps.append(np.asarray(steps_ns, np.float64) / 1e6)
            self.total += 1

    def figures(self) -> GenerationFigures | None:
        if not self._steps:
            return None
        ttft = np.asarray([s[0] for s in self._steps])
        decode = [s[1:] for s in self._steps if s.size > 1]
        tpot = np.concatenate(decode) if decode else np.empty(0)
        totals = np.asarray([s.sum() for s in self._steps])
        nan = float("nan")
        t50, t99 = np.percentile(ttft, [50, 99]) if ttft.size else (nan, nan)
        d50, d99 = np.percentile(tpot, [50, 99]) if tpot.size else (nan, nan)
        return GenerationFigures(
            generations=len(self._steps),
            ttft_p50_ms=float(t50),
            ttft_p99_ms=float(t99),
            tpot_p50_ms=float(d50),
            tpot_p99_ms=float(d99),
            tpot_count=int(tpot.size),
            prefill_share=float(ttft.mean() / totals.mean()) if totals.mean() > 0 else nan,
            decode_tokens_per_s=self.batch * 1e3 / float(d50) if tpot.size else nan,
            prefill_tokens_per_s=self.batch * self.prompt_len * 1e3 / float(t50)
            if self.prompt_len
            else nan,
        )
