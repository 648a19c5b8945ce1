"""What the latency plot draws for the time range in view, apart from the view: the samples
in it reduced to the pixel columns when there are more than columns, or every sample as it
is; one line through them, broken at pauses and at gaps far wider than the samples' own
spacing around them; and each sample that can be told apart from its neighbours a dot.
Judged locally, so a slow config beside a fast one in view draws as well as alone. Plain
numpy, no Qt: tested on its own."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from widgets.models.columns import column_envelope, column_starts
from widgets.models.latency_series import BIN_S
from widgets.models.pauses import break_at_pauses, gap_threshold
from widgets.models.ring_buffer import FloatArray

# A sample is a dot when no other lies within this many pixels of it: at 0.8 inferences/s
# in the 60 s followed window of a 1,000 px plot they are 21 px apart (the plot drew
# nothing there: lines only, never joined across more than 1 s); at 8/s, 2 px: lines only.
POINT_PX = 3.0
SPACINGS = 10.0  # a gap wider than this many of its neighbours' gaps breaks the line
RECENT = 20  # the newest samples in view whose spacing sets the throughput's smoothing


@dataclass
class Visible:
    """Lines as (x, y, connect) by name ("latency", "p50", "p90", "p99") and the dots."""

    lines: dict[str, tuple[FloatArray, FloatArray, np.ndarray]] = field(default_factory=dict)
    dots: tuple[FloatArray, FloatArray] | None = None  # the samples that stand apart
    spacing_s: float = 0.0  # the newest samples' typical spacing


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
    max and the percentiles' last value when there are more than 2 x `columns`, else every
    sample; joined unless a pause (its start in `breaks`) or a gap far wider than their
    spacing lies between; a dot at each sample POINT_PX from the others on `width_px`."""
    first = max(0, int(np.searchsorted(t, x0)) - 1)
    last = min(t.size, int(np.searchsorted(t, x1, side="right")) + 1)
    tv, lv = t[first:last], lat[first:last]
    out = Visible()
    if tv.size == 0:
        return out
    floor = gap_threshold(x0, x1, columns)
    apart = POINT_PX * max(x1 - x0, 1e-9) / max(width_px, 1.0)  # seconds
    tail = tv[-RECENT - 1 :]
    if tail.size > 1 and tail[-1] - tail[0] > 0.5 * BIN_S * (tail.size - 1):  # maybe sparse
        out.spacing_s = float(np.median(np.diff(tail)))  # (a pause among them: not its mean)
    if tv.size > 2 * columns:  # thousands of samples per second: pixel columns
        starts = column_starts(tv, columns)
        ends = np.r_[starts[1:], tv.size] - 1
        joins = _joins(tv, ends[:-1], starts[1:], floor)  # column to column
        x, y = column_envelope(tv, lv, starts)
        mask = np.ones(x.size, dtype=np.int32)  # min to max within a column: joined
        mask[1:-1:2] = joins
        out.lines["latency"] = (x, y, break_at_pauses(x, mask, breaks))
        xl = tv[ends]  # each column's last sample: the percentiles' points
        last_mask = break_at_pauses(xl, np.append(joins, np.int32(1)), breaks)
        for name, series in pcts.items():
            out.lines[name] = (xl, series[first:last][ends], last_mask)
        alone = starts[np.diff(np.r_[starts, tv.size]) == 1]  # columns of one sample
    else:
        idx = np.arange(tv.size)
        mask = np.r_[_joins(tv, idx[:-1], idx[1:], floor), 1].astype(np.int32)
        mask = break_at_pauses(tv, mask, breaks)
        out.lines["latency"] = (tv, lv, mask)
        for name, series in pcts.items():
            out.lines[name] = (tv, series[first:last], mask)
        alone = idx
    dots = alone[_stands_apart(tv, alone, apart)]
    if dots.size:
        out.dots = (tv[dots], lv[dots])
    return out


def _joins(t: FloatArray, a: np.ndarray, b: np.ndarray, floor: float) -> np.ndarray:
    """Whether sample a[i] joins sample b[i] (b[i] > a[i]): their gap is at most `floor`
    or SPACINGS times the wider of the gaps beside it (at 0.8 inferences/s every gap is
    above 1 s, and a line must join them; a fast run's 5 s stall is a break)."""
    joined = np.asarray(t[b] - t[a] <= floor, dtype=np.int32)
    wide = np.flatnonzero(joined == 0)  # few: only these need their neighbours' gaps
    if wide.size:
        a, b = a[wide], b[wide]
        before = t[a] - t[np.maximum(a - 1, 0)]
        after = t[np.minimum(b + 1, t.size - 1)] - t[b]
        joined[wide] = t[b] - t[a] <= SPACINGS * np.maximum(before, after)
    return joined


def _stands_apart(t: FloatArray, idx: np.ndarray, apart_s: float) -> np.ndarray:
    """Which of the samples `idx` have no other sample within `apart_s`."""
    if idx.size == 0:
        return np.zeros(0, dtype=bool)
    last = t.size - 1
    before = np.where(idx > 0, t[idx] - t[np.maximum(idx - 1, 0)], np.inf)
    after = np.where(idx < last, t[np.minimum(idx + 1, last)] - t[idx], np.inf)
    return np.asarray((before >= apart_s) & (after >= apart_s))


def smooth_rate(rate: FloatArray, spacing_s: float) -> FloatArray:
    """Samples/s per BIN_S bin, averaged over about four of the samples' own spacings when
    they come further apart than a bin: at 0.8 inferences of batch 64 a second the bins
    read 0, 128, 0, 128 samples/s (stalls, to the eye) where the run's rate is a steady 51."""
    if spacing_s <= BIN_S or rate.size < 2:
        return rate
    k = 4 * int(np.ceil(spacing_s / BIN_S)) + 1  # odd: centred on its bin
    # never wider than the bins (odd too): np.convolve's "same" returns the longer of
    # its inputs, and a curve with more rates than times raised at every paint (one
    # generation every 4 s, its first 16 s)
    k = min(k, rate.size - 1 + rate.size % 2)
    kernel = np.ones(k)
    sums = np.convolve(rate, kernel, mode="same")
    counts = np.convolve(np.ones(rate.size), kernel, mode="same")  # fewer at the ends
    return sums / counts
