"""A generating model's points on the live latency plot, apart from the view: one row per
generation (its time to first token, its time per output token, its end-to-end time and
the tokens it made), trailing-window p50/p90/p99 of each from the raw per-generation
values with their count, and tokens per second that do not saw. Plain numpy, no Qt.

Why per generation: a generation of a 135 M model takes seconds, so samples counted into
0.5 s bins read 0, 0, ..., N (a sawtooth); a generation's own tokens over its own
end-to-end time is the rate it ran at, and the window's tokens over the window's
generating time is the figure above the plot."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from widgets.models.latency_series import QUANTILES
from widgets.models.ring_buffer import FloatArray, RingBuffer

T, TTFT, TPOT, E2E, TOKENS = range(5)  # the ring's columns
SERIES = {"ttft": TTFT, "tpot": TPOT, "e2e": E2E}


def generation_row(steps_ms: npt.ArrayLike, batch: int) -> tuple[float, float, float, float]:
    """(TTFT, TPOT, end to end, tokens) of one generation from its passes in ms: the first
    is the prefill (to the first token), each later one a decode step. TPOT is the mean
    decode step (NaN with a single token); tokens count every sequence's."""
    steps = np.asarray(steps_ms, dtype=np.float64).ravel()
    if steps.size == 0:
        raise ValueError("a generation has at least its first token's pass")
    tpot = float(steps[1:].mean()) if steps.size > 1 else math.nan
    return float(steps[0]), tpot, float(steps.sum()), float(max(1, batch) * steps.size)


class GenerationSeries:
    """Per-generation rows, bounded in memory; trailing windows restart at a config change."""

    def __init__(self, capacity: int = 20_000, window: int = 200) -> None:
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.window = min(window, capacity)
        self.buffer = RingBuffer(capacity, 5)
        self._segment_total = 0  # rows appended before the running config's first

    def __len__(self) -> int:
        return len(self.buffer)

    @property
    def total(self) -> int:
        return self.buffer.total

    def append(self, t_s: float, steps_ms: npt.ArrayLike, batch: int) -> None:
        """One generation that started at `t_s` (s on the plot's clock), its passes in ms.
        A start before the last one's (never expected) is drawn at the last one's."""
        row = generation_row(steps_ms, batch)
        last = float(self.buffer.view(T)[-1]) if len(self.buffer) else -np.inf
        t = max(float(t_s), last)
        self.buffer.append([np.asarray([v]) for v in (t, *row)])

    def clear(self) -> None:
        self.buffer.clear()
        self._segment_total = 0

    def start_segment(self) -> None:
        """A config change: the window's figures come from its generations only."""
        self._segment_total = self.buffer.total

    def series(self, name: str) -> tuple[FloatArray, FloatArray]:
        """(t_s, ms) of "ttft", "tpot" or "e2e", oldest first; views valid until the next
        append."""
        return self.buffer.view(T), self.buffer.view(SERIES[name])

    def rates(self) -> tuple[FloatArray, FloatArray]:
        """(t_s, tokens/s) of each generation: its tokens over its end-to-end time."""
        e2e = self.buffer.view(E2E)
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.where(e2e > 0, self.buffer.view(TOKENS) * 1e3 / e2e, np.nan)
        return self.buffer.view(T), rate

    def span(self, x0: float, x1: float) -> tuple[float, float] | None:
        """The smallest and largest value of any series among the generations in [x0, x1]
        (finite ones; None when there are none): the followed y range."""
        t = self.buffer.view(T)
        i0, i1 = int(np.searchsorted(t, x0)), int(np.searchsorted(t, x1, side="right"))
        if i0 >= i1:
            return None
        values = np.concatenate([self.buffer.view(c)[i0:i1] for c in SERIES.values()])
        values = values[np.isfinite(values) & (values > 0)]
        return (float(values.min()), float(values.max())) if values.size else None

    def latest_stats(self) -> dict[str, Any]:
        """Over the running config's last `window` generations: `count`, `segment` (its
        generations so far), `span_s` (first to last start), p50/p90/p99 in ms of each
        series (`ttft_p50` ...; TPOT's over the generations that had a decode step), and
        `tokens_per_s` (their tokens over their summed end-to-end time)."""
        segment = self.buffer.total - self._segment_total
        n = min(self.window, segment, len(self.buffer))
        stats: dict[str, Any] = {"count": max(n, 0), "segment": max(segment, 0), "span_s": 0.0,
                                 "tokens_per_s": math.nan}  # fmt: skip
        for name in SERIES:
            for q in QUANTILES:
                stats[f"{name}_p{q:.0f}"] = math.nan
        if n <= 0:
            return stats
        t = self.buffer.view(T)[-n:]
        stats["span_s"] = float(t[-1] - t[0])
        for name, col in SERIES.items():
            values = self.buffer.view(col)[-n:]
            values = values[np.isfinite(values)]
            if values.size:
                for q, v in zip(QUANTILES, np.percentile(values, QUANTILES), strict=True):
                    stats[f"{name}_p{q:.0f}"] = float(v)
        e2e_s = float(self.buffer.view(E2E)[-n:].sum()) / 1e3
        if e2e_s > 0:
            stats["tokens_per_s"] = float(self.buffer.view(TOKENS)[-n:].sum()) / e2e_s
        return stats
