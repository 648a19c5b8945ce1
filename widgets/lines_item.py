"""Several polylines in one graphics item, reduced to what the pixels can show.

The live latency view redraws ten times a second while the engine keeps every core busy,
so each frame must cost the GUI thread little. A pyqtgraph PlotDataItem per line costs
several milliseconds a frame in Python alone (bounds over the data, clipping, pixel
vectors, its own downsampling); this item takes lines already reduced in numpy, keeps their
QPainterPaths, reports bounds computed once per update and draws them all in one `paint`.

`column_envelope` and `column_last` (widgets/models/columns.py) do the reduction: per pixel
column, the min and max of the samples (every spike stays visible) or the last value (for
already smoothed series).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyqtgraph as pg
import pyqtgraph.functions as fn
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QPainter, QPainterPath, QPen, QPolygonF

from widgets.models.columns import column_envelope, column_last, column_starts
from widgets.models.ring_buffer import FloatArray

__all__ = ["LinesItem", "column_envelope", "column_last", "column_starts"]


DOT_PX = 5  # a sample drawn as a dot: this wide, in screen pixels


@dataclass
class _Line:
    pen: QPen
    x: FloatArray
    y: FloatArray
    path: QPainterPath
    dots: QPolygonF | None = None  # each sample as a dot too (few samples in view)


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

    def set_dots(self, name: str, x: FloatArray | None, y: FloatArray | None = None) -> None:
        """Draw these points of line `name` as dots of its colour too (None: no dots)."""
        line = self._lines[name]
        if x is None or y is None or not x.size:
            line.dots = None
            return
        poly = fn.create_qpolygonf(x.size)
        xy = fn.ndarray_from_qpolygonf(poly)
        xy[:, 0], xy[:, 1] = x, y
        line.dots = poly

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
            self.set_dots(name, None)
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
            if line.dots is not None:
                dot = QPen(line.pen)
                dot.setWidth(DOT_PX)
                dot.setCapStyle(Qt.PenCapStyle.RoundCap)
                p.setPen(dot)
                p.drawPoints(line.dots)
