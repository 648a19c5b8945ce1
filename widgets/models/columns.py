"""Many samples reduced to what pixel columns can show: per column the min and max (every
spike stays visible) or the last value (for already smoothed series). Plain numpy, no Qt."""

from __future__ import annotations

import numpy as np

from widgets.models.ring_buffer import FloatArray


def column_starts(t: FloatArray, columns: int) -> np.ndarray:
    """Index of the first sample of each non-empty column when [t[0], t[-1]] is cut into
    `columns` equal spans (t non-decreasing)."""
    if t.size == 0:
        return np.zeros(0, dtype=np.intp)
    step = (float(t[-1]) - float(t[0])) / max(1, columns)
    if step <= 0:
        return np.zeros(1, dtype=np.intp)
    starts = np.searchsorted(t, float(t[0]) + step * np.arange(columns))
    return starts[np.r_[True, np.diff(starts) > 0]]


def column_envelope(
    t: FloatArray, y: FloatArray, starts: np.ndarray
) -> tuple[FloatArray, FloatArray]:
    """(x, y) visiting each column's min then max: the exact outline at that resolution."""
    ends = np.r_[starts[1:], t.size] - 1
    xs = np.empty(2 * starts.size)
    ys = np.empty(2 * starts.size)
    xs[0::2], xs[1::2] = t[starts], t[ends]
    ys[0::2], ys[1::2] = np.minimum.reduceat(y, starts), np.maximum.reduceat(y, starts)
    return xs, ys


def column_last(t: FloatArray, y: FloatArray, starts: np.ndarray) -> tuple[FloatArray, FloatArray]:
    ends = np.r_[starts[1:], t.size] - 1
    return t[ends], y[ends]
