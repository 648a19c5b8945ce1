"""A left axis that can read log10 values as plain milliseconds.

A generating model's time to first token, time per output token and end-to-end time
differ by one or two orders of magnitude (67 ms, 514 ms, 2.7 s for a 135 M model): on a
linear axis the time per token is a flat line on the floor. The plot hands log10(ms) to
its items; this axis ticks them at 1, 2, 5, 10, 20, 50 ... and labels them in ms
('5,000', not pyqtgraph's '5e+03'). With `log` off it is pyqtgraph's own axis."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg

from widgets.numbers import figure

_STEPS = (1.0, 2.0, 5.0)


def log_ticks(lo: float, hi: float) -> tuple[list[float], list[float]]:
    """(major, minor) tick positions in log10 units within [lo, hi] (log10 values): the
    1-2-5 values as major ticks, or only the decades with their 2 and 5 as minor ones when
    the range spans more than four decades."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [], []
    values = [
        step * 10.0**d for d in range(math.floor(lo) - 1, math.ceil(hi) + 1) for step in _STEPS
    ]
    logs = [math.log10(v) for v in values]
    inside = [x for x in logs if lo - 1e-9 <= x <= hi + 1e-9]
    if hi - lo <= 4.0:
        return inside, []
    major = [x for x in inside if abs(x - round(x)) < 1e-9]
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
        major, minor = log_ticks(minVal, maxVal)
        return [(1.0, major), (0.5, minor)]

    def tickStrings(self, values: list[float], scale: float, spacing: float) -> list[str]:
        if not self.log:
            return list(super().tickStrings(values, scale, spacing))
        if spacing < 1.0:  # the minor level (2 and 5 between decades): unlabelled
            return ["" for _ in values]
        return [figure(float(10.0 ** np.float64(v))) for v in values]
