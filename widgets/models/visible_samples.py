"""What the latency plot draws for the time range in view, apart from the view: the samples
in it reduced to the pixel columns when there are more than columns, or every sample as it
is, joined by a line (broken at pauses) and, when they are far enough apart to be told
apart, each one a dot. Plain numpy, no Qt: tested on its own."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from widgets.models.columns import column_envelope, column_last, column_starts
from widgets.models.latency_series import BIN_S
from widgets.models.pauses import connect_mask, gap_threshold
from widgets.models.ring_buffer import FloatArray

# Every inference is a dot when those in view are at least this many pixels apart on
# average: below ~2.8 inferences/s in the 60 s followed window of a 1,000 px plot, where
# lines alone showed nothing (a run at 0.8/s: no two samples within the 1 s join limit).
POINT_PX = 6.0


@dataclass
class Visible:
    """Lines as (x, y, connect) by name ("latency", "p50", "p90", "p99") and the dots."""

    lines: dict[str, tuple[FloatArray, FloatArray, np.ndarray]] = field(default_factory=dict)
    dots: tuple[FloatArray, FloatArray] | None = None  # every sample in view, when few
    spacing_s: float = 0.0  # the samples' typical spacing (few in view; else 0)


def visible(
    t: FloatArray,
    lat: FloatArray,
    pcts: dict[str, FloatArray],
    x0: float,
    x1: float,
    width_px: float,
    columns: int,
    breaks: Sequence[float] = (),
) -> Visible:
    """The samples in [x0, x1] (and one beyond each edge): per column the latency's min and
    max and the percentiles' last value when there are more than 2 x `columns`; else every
    sample, joined unless a pause (its start in `breaks`) or a gap far wider than their own
    spacing lies between, and dots when they are POINT_PX apart on the plot's `width_px`."""
    first = max(0, int(np.searchsorted(t, x0)) - 1)
    last = min(t.size, int(np.searchsorted(t, x1, side="right")) + 1)
    tv, lv = t[first:last], lat[first:last]
    out = Visible()
    if tv.size > 2 * columns:  # the fast path: thousands of samples per second
        gap = gap_threshold(x0, x1, columns)
        starts = column_starts(tv, columns)
        x, y = column_envelope(tv, lv, starts)
        out.lines["latency"] = (x, y, connect_mask(x, gap, breaks))
        for name, series in pcts.items():
            x, y = column_last(tv, series[first:last], starts)
            out.lines[name] = (x, y, connect_mask(x, gap, breaks))
        return out
    spacing = float(np.median(np.diff(tv))) if tv.size > 2 else 0.0
    mask = connect_mask(tv, gap_threshold(x0, x1, columns, spacing), breaks)
    out.lines["latency"] = (tv, lv, mask)
    out.spacing_s = spacing
    for name, series in pcts.items():
        out.lines[name] = (tv, series[first:last], mask)
    if tv.size and tv.size * POINT_PX <= max(width_px, 1.0):
        out.dots = (tv, lv)
    return out


def smooth_rate(rate: FloatArray, spacing_s: float) -> FloatArray:
    """Samples/s per BIN_S bin, averaged over about four of the samples' own spacings when
    they come further apart than a bin: at 0.8 inferences of batch 64 a second the bins
    read 0, 128, 0, 128 samples/s (stalls, to the eye) where the run's rate is a steady 51."""
    if spacing_s <= BIN_S or rate.size < 2:
        return rate
    k = 4 * int(np.ceil(spacing_s / BIN_S)) + 1  # odd: centred on its bin
    kernel = np.ones(k)
    sums = np.convolve(rate, kernel, mode="same")
    counts = np.convolve(np.ones(rate.size), kernel, mode="same")  # fewer at the ends
    return sums / counts
