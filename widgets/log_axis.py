"""A left axis that can read log10 values as plain milliseconds.

A generating model's time to first token, time per output token and end-to-end time
differ by one or two orders of magnitude (67 ms, 514 ms, 2.7 s for a 135 M model): on a
linear axis the time per token is a flat line on the floor. The plot hands log10(ms) to
its items; this axis ticks them at 1, 2, 5, 10, 20, 50 ... (at the decades on a short
axis) and labels them in ms ('5,000', not pyqtgraph's '5e+03'). With `log` off it is
pyqtgraph's own axis."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg

from widgets.numbers import figure

_STEPS = (1.0, 2.0, 5.0)
MIN_TICK_PX = 18  # labelled ticks closer than this on the axis run into each other


def log_ticks(lo: float, hi: float, size_px: float = 1e9) -> tuple[list[float], list[float]]:
    """(major, minor) tick positions in log10 units within [lo, hi] (log10 values) on an
    axis `size_px` long: the 1-2-5 values where a decade has room for three labels, else
    the decades (every other one when even those crowd), with the 2 and 5 as minor ticks."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [], []
    values = [
        step * 10.0**d for d in range(math.floor(lo) - 1, math.ceil(hi) + 1) for step in _STEPS
    ]
    logs = [math.log10(v) for v in values]
    inside = [x for x in logs if lo - 1e-9 <= x <= hi + 1e-9]
    per_decade = size_px / (hi - lo)
    if per_decade >= 3 * MIN_TICK_PX:
        return inside, []
    every = 1 if per_decade >= MIN_TICK_PX else 2
    major = [x for x in inside if abs(x - round(x)) < 1e-9 and round(x) % every == 0]
    return major, [x for x in inside if x not in major]


class LatencyAxis(pg.AxisItem):
    """pyqtgraph's AxisItem; with `log` on, its values are log10(ms), ticked 1-2-5."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.log = False

    def set_log(self, on: bool) -> None:
        self.log = bool(on)
        self.picture = None  # redraw the ticks
        self.update()

    def tickValues(self, minVal: float, maxVal: float, size: float) -> Any:
        if not self.log:
            return super().tickValues(minVal, maxVal, size)
        major, minor = log_ticks(minVal, maxVal, size)
        return [(1.0, major), (0.5, minor)]

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        if not self.log:
            return list(super().tickStrings(values, scale, spacing))
        if spacing < 1.0:  # the minor level (2 and 5 between decades): unlabelled
            return ["" for _ in values]
        return [figure(float(10.0 ** np.float64(v))) for v in values]
