"""A sparkline: one small line over a time range, painted straight with QPainter.

The telemetry strip shows several of these and repaints them while the engine keeps every
core busy. A pyqtgraph PlotWidget per sparkline (a graphics view, a scene, a view box and
four axes, hidden ones included) took 14 ms of the GUI thread to repaint seven of them;
this widget keeps one QPainterPath in data coordinates and paints it through one
transform, without antialiasing: 4 ms for the same seven.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import (
    QColor,
    QPainter,
    QPainterPath,
    QPaintEvent,
    QPalette,
    QPen,
    QResizeEvent,
    QTransform,
)
from PySide6.QtWidgets import QSizePolicy, QWidget

from widgets.lines_item import column_envelope, column_starts
from widgets.models.ring_buffer import FloatArray


def padded_range(lo: float, hi: float, padding: float) -> tuple[float, float]:
    """[lo, hi] widened by `padding` of its span on each side; a flat series gets a span of
    its own size (or 1 around zero) so it draws as a line across the middle."""
    span = hi - lo
    if span <= 0:
        span = abs(hi) or 1.0
        return lo - span / 2, hi + span / 2
    return lo - span * padding, hi + span * padding


class Sparkline(QWidget):
    """`set_data(t, v)` and `set_x_range(x0, x1)`; the y range fits the visible samples."""

    def __init__(
        self, parent: QWidget | None = None, *, color: str = "#4c8bf5", padding: float = 0.08
    ) -> None:
        super().__init__(parent)
        self.padding = padding
        self._pen = QPen(QColor(color), 1.0)
        self._pen.setCosmetic(True)  # one pixel wide, whatever the transform
        self._t: FloatArray = np.zeros(0)
        self._v: FloatArray = np.zeros(0)
        self._x_range: tuple[float, float] | None = None
        self._path = QPainterPath()
        self._rect = QRectF()  # the data rectangle the widget shows
        self._stale = True
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        return QSize(160, 34)

    # ------------------------------------------------------------------------------- API
    def set_data(self, t: FloatArray, v: FloatArray) -> None:
        """The series, t non-decreasing (copied: ring-buffer views change on append)."""
        self._t, self._v = np.array(t, dtype=np.float64), np.array(v, dtype=np.float64)
        self._stale = True
        self.update()

    def set_x_range(self, x0: float, x1: float) -> None:
        if self._x_range != (x0, x1):
            self._x_range = (float(x0), float(x1))
            self._stale = True
            self.update()

    def x_range(self) -> tuple[float, float]:
        """The time span shown: the one set, else the data's."""
        if self._x_range is not None:
            return self._x_range
        return (float(self._t[0]), float(self._t[-1])) if self._t.size else (0.0, 1.0)

    def y_range(self) -> tuple[float, float]:
        self._rebuild()
        return self._rect.top(), self._rect.bottom()

    def data(self) -> tuple[FloatArray, FloatArray]:
        return self._t, self._v

    # ----------------------------------------------------------------------------- paint
    def _rebuild(self) -> None:
        """Fit the y range to the visible samples; reduce them (and one either side, so the
        line reaches the edges) to a min/max envelope per pixel column."""
        if not self._stale:
            return
        self._stale = False
        x0, x1 = self.x_range()
        if x1 <= x0:
            x1 = x0 + 1.0
        t, v = self._t, self._v
        first = int(np.searchsorted(t, x0, side="left"))
        last = int(np.searchsorted(t, x1, side="right"))
        shown = v[first:last] if last > first else v[max(0, first - 1) : last + 1]
        y0, y1 = (
            padded_range(float(shown.min()), float(shown.max()), self.padding)
            if shown.size
            else (0.0, 1.0)
        )
        t, v = t[max(0, first - 1) : last + 1], v[max(0, first - 1) : last + 1]
        self._path = QPainterPath()
        self._rect = QRectF(QPointF(x0, y0), QPointF(x1, y1))
        if t.size > 2 * max(1, self.width()):
            t, v = column_envelope(t, v, column_starts(t, max(1, self.width())))
        if t.size:
            self._path = pg.arrayToQPath(t, v)

    def resizeEvent(self, event: QResizeEvent) -> None:
        self._stale = True  # the envelope has one column per pixel
        super().resizeEvent(event)

    def paintEvent(self, event: QPaintEvent) -> None:
        self._rebuild()
        painter = QPainter(self)
        painter.fillRect(self.rect(), self.palette().color(QPalette.ColorRole.Base))
        if not self._path.isEmpty():
            r = self._rect
            # data (x right, y up) -> pixels, a pixel of margin top and bottom
            h = max(1, self.height() - 2)
            transform = QTransform()
            transform.translate(0, 1 + h)
            transform.scale(self.width() / r.width(), -h / r.height())
            transform.translate(-r.left(), -r.top())
            painter.setRenderHint(QPainter.RenderHint.Antialiasing, False)  # 1 px: cheaper
            painter.setPen(self._pen)
            painter.setTransform(transform)
            painter.drawPath(self._path)
        painter.end()
