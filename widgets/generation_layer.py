"""What the live latency plot adds for a generating model: its per-generation series
(time to first token, time per output token, beside the end-to-end latency the plot
already draws), a log latency axis, tokens/s per generation in the plot below, and the
figures above the plot. The plot (widgets/latency_plot.py) asks this layer; an encoder's
plot never turns it on and draws as before."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from widgets import theme
from widgets.generation_panel import DECODE_COLOR, PREFILL_COLOR
from widgets.models.generation_series import GenerationSeries
from widgets.models.latency_series import calm_top, window_text
from widgets.models.pauses import break_at_pauses
from widgets.models.ring_buffer import FloatArray
from widgets.models.visible_samples import visible
from widgets.numbers import figure

TTFT_COLOR = PREFILL_COLOR  # the Generation dock's split bar: prefill | decode
TPOT_COLOR = DECODE_COLOR
# legend names of the series, in the plot's lines' names
NAMES = {"ttft": "TTFT", "tpot": "TPOT"}
LOG_FLOOR_MS = 1e-3  # below this a value is drawn at this (log10 of 0 is -inf)
GENERATION_TEMPLATE = (  # the longest header text: its label's fixed size
    "end to end p50 88,888 ms · p90 88,888 ms · p99 88,888 ms · 8,888 tokens/s\n"
    "TTFT p50 8,888 p90 8,888 p99 8,888 ms · TPOT p50 888.8 p90 888.8 p99 888.8 ms\n"
    "over the last 200 generations (88.8 min) of 88,888 since the config change"
)
GENERATION_TIP = (
    "Over the running config's last generations (the third line says how many, over how "
    "long), from each generation's own values: end to end (the dashed lines on the plot), "
    "TTFT (time to first token: the prompt's prefill), TPOT (a generation's mean time per "
    "output token after the first), and tokens/s (the generations' tokens over their "
    "summed end-to-end time). The Runs table's are over whole runs."
)
_NICE = (1.0, 2.0, 5.0)
_EMPTY = np.zeros(0)
Dots = tuple[FloatArray, FloatArray]


class GenerationLayer:
    """On for a generating model: holds its generations, says how to draw them."""

    def __init__(self, capacity: int = 20_000, window: int = 200) -> None:
        self.on = False
        self.series = GenerationSeries(capacity, window)

    def append(self, t_s: float, steps_ms: npt.ArrayLike, batch: int) -> None:
        self.series.append(t_s, steps_ms, batch)

    def y(self, ms: npt.ArrayLike) -> np.ndarray:
        """Values as the latency plot's items take them: log10(ms) when on, else ms."""
        values = np.asarray(ms, dtype=np.float64)
        if not self.on:
            return values
        with np.errstate(invalid="ignore"):
            return np.log10(np.maximum(values, LOG_FLOOR_MS))

    def y_range(
        self, lo_ms: float, hi_ms: float, current: tuple[float, float]
    ) -> tuple[float, float]:
        """The followed latency range in log10 units: from a 1-2-5 value below the smallest
        value to a round number well above the largest (`calm_top`), each kept while the
        values still sit inside it with room, so the axis holds still."""
        lo_ms, hi_ms = max(lo_ms, LOG_FLOOR_MS), max(hi_ms, LOG_FLOOR_MS)
        c0, c1 = 10.0 ** current[0], 10.0 ** current[1]
        bottom = c0 if 1.2 * c0 <= lo_ms <= 6.0 * c0 else nice_floor(lo_ms / 1.5)
        top = calm_top(c1 if c1 > bottom else 0.0, 1.5 * hi_ms)
        return math.log10(bottom), math.log10(max(top, 2.0 * bottom))

    # ------------------------------------------------------------------------- drawing
    def lines(
        self, x0: float, x1: float, width: float, columns: int, breaks: Sequence[float]
    ) -> dict[str, tuple[FloatArray, FloatArray, np.ndarray, Dots | None]]:
        """TTFT and TPOT in [x0, x1] as the plot draws them (`visible`: every generation
        a point, or pixel columns when there are more): (x, log10 y, connect, dots)."""
        out: dict[str, tuple[FloatArray, FloatArray, np.ndarray, Dots | None]] = {}
        for name in NAMES:
            t, v = self.series.series(name)
            keep = np.isfinite(v)  # TPOT of a one-token generation: none
            shown = visible(t[keep], v[keep], {}, x0, x1, width, columns, breaks)
            x, y, mask = shown.lines.get("latency", (_EMPTY, _EMPTY, _EMPTY))
            dots = (shown.dots[0], self.y(shown.dots[1])) if shown.dots else None
            out[name] = (x, self.y(y), mask, dots)
        return out

    def extent(self, t: FloatArray, e2e: FloatArray) -> tuple[float, float, float, float]:
        """(x0, x1, y0, y1) of every series, the plot's end-to-end samples `t`, `e2e`
        among them, in the plot's units: what auto-range fits."""
        gt = self.series.series("ttft")[0]
        times = [a for a in (t, gt) if a.size]
        values = [e2e, *(self.series.series(name)[1] for name in (*NAMES, "e2e"))]
        every = np.concatenate(values)
        every = every[np.isfinite(every) & (every > 0)]
        lo, hi = (float(every.min()), float(every.max())) if every.size else (1.0, 1.0)
        if not times:
            return 0.0, 1.0, float(self.y(lo)), float(self.y(hi))
        x0, x1 = min(float(a[0]) for a in times), max(float(a[-1]) for a in times)
        return x0, x1, float(self.y(lo)), float(self.y(hi))

    def in_view(self, x0: float, x1: float, e2e: FloatArray) -> tuple[float, float]:
        """The smallest and largest ms among the generations in [x0, x1] and the plot's
        end-to-end samples there (`e2e`): what the followed range must hold."""
        span = self.series.span(x0, x1)
        e2e = e2e[np.isfinite(e2e) & (e2e > 0)]
        lows = [*([span[0]] if span else []), *([float(e2e.min())] if e2e.size else [])]
        highs = [*([span[1]] if span else []), *([float(e2e.max())] if e2e.size else [])]
        return min(lows, default=1.0), max(highs, default=1.0)

    def rates_shown(
        self, x0: float, x1: float, following: bool, breaks: Sequence[float]
    ) -> tuple[FloatArray, FloatArray, np.ndarray]:
        """(t, tokens/s, connect) of the generations the plot below draws: those in view
        (and one beyond each edge) while following, else all; broken at pauses."""
        t, rate = self.series.rates()
        if following:
            j0 = max(0, int(np.searchsorted(t, x0)) - 1)
            j1 = min(t.size, int(np.searchsorted(t, x1, side="right")) + 1)
            t, rate = t[j0:j1], rate[j0:j1]
        keep = np.isfinite(rate)
        t, rate = t[keep], rate[keep]
        return t, rate, break_at_pauses(t, np.ones(t.size, dtype=np.int32), breaks)

    def rate_top(self, x0: float) -> float:
        """The highest tokens/s from `x0` on (at least 1): the followed range's top."""
        t, rate = self.series.rates()
        shown = rate[int(np.searchsorted(t, x0)) :]
        shown = shown[np.isfinite(shown)]
        return max(float(shown.max()) if shown.size else 1.0, 1.0)

    # ------------------------------------------------------------------------- the header
    def header(self, e2e: dict[str, Any], total: int) -> str:
        """Three lines: end to end (the plot's percentile lines) with tokens/s, then TTFT
        and TPOT, then which generations the figures are over."""
        g = self.series.latest_stats()
        pcts = (("p50", theme.P50), ("p90", theme.P90), ("p99", theme.P99))
        first = " · ".join(
            [f"end to end <b style='color:{c}'>{q}</b> {figure(e2e[q])} ms" if q == "p50"
             else f"<b style='color:{c}'>{q}</b> {figure(e2e[q])} ms" for q, c in pcts]
            + [f"{figure(g['tokens_per_s'], 4)} tokens/s"]
        )  # fmt: skip
        second = " · ".join(
            f"<b style='color:{color}'>{label}</b> "
            + " ".join(f"{q} {figure(g[f'{key}_{q}'])}" for q, _ in pcts)
            + " ms"
            for key, label, color in (("ttft", "TTFT", TTFT_COLOR), ("tpot", "TPOT", TPOT_COLOR))
        )
        return f"{first}<br>{second}<br>{window_text({**e2e, 'unit': 'generation'}, total)}"

    def stats(self, e2e: dict[str, Any]) -> dict[str, Any]:
        """The figures the status bar repeats: end to end's, counted in generations, with
        the window's tokens/s."""
        g = self.series.latest_stats()
        return {**e2e, "unit": "generation", "tokens_per_s": g["tokens_per_s"]}


def nice_floor(ms: float) -> float:
    """The largest 1, 2 or 5 times a power of ten at or below `ms` (> 0)."""
    decade = 10.0 ** math.floor(math.log10(ms))
    return max(step * decade for step in _NICE if step * decade <= ms * (1 + 1e-9))
