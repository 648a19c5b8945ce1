"""Several polylines in one graphics item, reduced to what the pixels can show.

The live latency view redraws ten times a second while the engine keeps every core busy,
so each frame must cost the GUI thread little. A pyqtgraph PlotDataItem per line costs
several milliseconds a frame in Python alone (bounds over the data, clipping, pixel
vectors, its own downsampling); this item takes lines already reduced in numpy, keeps their
QPainterPaths, reports bounds computed once per update and draws them all in one `paint`.

`column_envelope` and `column_last` do the reduction: per pixel column, the min and max of
the samples (every spike stays visible) or the last value (for already smoothed series).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtGui import QPainter, QPainterPath, QPen

from widgets.models.ring_buffer import FloatArray


@dataclass
class _Line:
    pen: QPen
    x: FloatArray
    y: FloatArray
    path: QPainterPath


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


class LinesItem(pg.GraphicsObject):
    """Named polylines drawn in insertion order; `set_line` replaces one line's data."""

    def __init__(self) -> None:
        super().__init__()
        self._lines: dict[str, _Line] = {}
        self._rect = QRectF()
        self._full: tuple[float, float, float, float] | None = None  # x0, x1, y0, y1

    def add_line(self, name: str, pen: QPen) -> None:
        pen = QPen(pen)
        pen.setCosmetic(True)
        empty = np.zeros(0)
        self._lines[name] = _Line(pen, empty, empty, QPainterPath())

    def set_line(
        self, name: str, x: FloatArray, y: FloatArray, connect: np.ndarray | None = None
    ) -> None:
        """`connect` (pyqtgraph's): 1 where point i joins point i + 1, 0 to break the line
        (a pause in the samples); default: all joined."""
        line = self._lines[name]
        line.x, line.y = x, y
        if not x.size:
            line.path = QPainterPath()
        else:
            line.path = pg.arrayToQPath(x, y, connect="all" if connect is None else connect)

    def set_pen(self, name: str, pen: QPen) -> None:
        pen = QPen(pen)
        pen.setCosmetic(True)
        self._lines[name].pen = pen
        self.update()

    def data(self, name: str) -> tuple[FloatArray, FloatArray]:
        line = self._lines[name]
        return line.x, line.y

    def finish(self, full: tuple[float, float, float, float] | None = None) -> None:
        """Call after the `set_line`s of one update. `full` (x0, x1, y0, y1) is the extent
        of all the data the lines stand for, which auto-range uses; default: what is drawn."""
        xs = [ln.x for ln in self._lines.values() if ln.x.size]
        ys = [ln.y for ln in self._lines.values() if ln.y.size]
        self.prepareGeometryChange()
        if xs:
            x0, x1 = min(float(a[0]) for a in xs), max(float(a[-1]) for a in xs)
            y0, y1 = min(float(a.min()) for a in ys), max(float(a.max()) for a in ys)
            self._rect = QRectF(x0, y0, max(x1 - x0, 1e-9), max(y1 - y0, 1e-9))
            self._full = full or (x0, x1, y0, y1)
        else:
            self._rect, self._full = QRectF(), None
        self.update()

    def clear(self) -> None:
        for name in self._lines:
            self.set_line(name, np.zeros(0), np.zeros(0))
        self.finish()

    # QGraphicsItem / pyqtgraph protocol ----------------------------------------------------
    def boundingRect(self) -> QRectF:
        return QRectF(self._rect)

    def dataBounds(
        self, ax: int, frac: float = 1.0, orthoRange: Any = None
    ) -> tuple[float, float] | tuple[None, None]:
        if self._full is None:
            return None, None
        return (self._full[0], self._full[1]) if ax == 0 else (self._full[2], self._full[3])

    def paint(self, p: QPainter, *args: Any) -> None:
        for line in self._lines.values():
            if not line.path.isEmpty():
                p.setPen(line.pen)
                p.drawPath(line.path)
