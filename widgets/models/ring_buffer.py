"""A preallocated, bounded column store whose live region is always one contiguous view.

Plots hand `view(col)` straight to pyqtgraph's `setData` (no copy). Storage is 3x the
capacity: appends write past the live region and, when the end is reached, the newest
points move to the front. 3x (not 2x) guarantees that move never overwrites a view handed
out at the previous paint, so a repaint between an append and the next paint never shows
torn data.

The storage is written once at construction, so the memory it takes is resident from the
start: zeroed but untouched pages would be committed one by one as rows first reach them,
and a live window's RSS would then creep up for hours (the 3x region of 300,000 latency
rows is 36 MB) as if it leaked, until the ring wrapped for the first time.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


class RingBuffer:
    """`columns` float64 columns holding at most `capacity` rows; the oldest rows drop."""

    def __init__(self, capacity: int, columns: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if columns < 1:
            raise ValueError(f"columns must be >= 1, got {columns}")
        self.capacity = capacity
        self._data: FloatArray = np.empty((columns, 3 * capacity), dtype=np.float64)
        self._data.fill(0.0)  # every page touched now, not as the rows first reach it
        self._start = 0
        self._end = 0
        self._total = 0

    def __len__(self) -> int:
        return self._end - self._start

    @property
    def columns(self) -> int:
        return int(self._data.shape[0])

    @property
    def total(self) -> int:
        """Rows ever appended (since the last clear); `total - len(self)` were dropped."""
        return self._total

    @property
    def nbytes(self) -> int:
        """Memory held, fixed (and resident) from construction."""
        return int(self._data.nbytes)

    def view(self, col: int) -> FloatArray:
        """The live rows of one column, oldest first: a view, valid until the next append."""
        return self._data[col, self._start : self._end]

    def append(self, values: Sequence[npt.ArrayLike]) -> None:
        """Append rows given column by column; scalars broadcast to the rows' length."""
        if len(values) != self.columns:
            raise ValueError(f"expected {self.columns} columns, got {len(values)}")
        arrays = [np.asarray(v, dtype=np.float64) for v in values]
        k = max((a.size for a in arrays if a.ndim > 0), default=1)
        if k == 0:
            return
        self._total += k
        skip = max(0, k - self.capacity)  # rows that would drop at once: never stored
        k -= skip
        if self._end + k > self._data.shape[1]:
            keep = min(len(self), self.capacity - k)
            self._data[:, :keep] = self._data[:, self._end - keep : self._end]
            self._start, self._end = 0, keep
        for col, a in enumerate(arrays):
            self._data[col, self._end : self._end + k] = a[skip:] if a.ndim > 0 else a
        self._end += k
        self._start = max(self._start, self._end - self.capacity)

    def write(self, col: int, first: int, values: npt.ArrayLike) -> None:
        """Overwrite one column from live row `first` on (for values computed later)."""
        a = np.asarray(values, dtype=np.float64)
        if first < 0 or first + a.size > len(self):
            raise IndexError(f"rows {first}..{first + a.size} outside 0..{len(self)}")
        self._data[col, self._start + first : self._start + first + a.size] = a

    def clear(self) -> None:
        self._start = self._end = self._total = 0
