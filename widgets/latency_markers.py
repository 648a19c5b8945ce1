"""The labelled lines across the latency plot: a dashed vertical line at each config change
(its label staggered in height when changes crowd, dropped with the data it precedes) and
the horizontal line at the p99 target."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from widgets import theme

_LABEL_LEVELS = (0.97, 0.86, 0.75)  # marker label heights, staggered when markers crowd
CROWDED = 0.15  # of the followed window: a marker this close to the last one is staggered


@dataclass
class _Marker:
    t_s: float
    label: str
    lines: tuple[pg.InfiniteLine, pg.InfiniteLine]


class ChangeMarkers:
    """Config-change markers: a labelled line in the latency plot, a plain one below."""

    def __init__(self, latency_plot: pg.PlotItem, throughput_plot: pg.PlotItem) -> None:
        self._plots = (latency_plot, throughput_plot)
        self._markers: list[_Marker] = []
        self._level = 0

    @property
    def shown(self) -> list[tuple[float, str]]:
        return [(m.t_s, m.label) for m in self._markers]

    def add(self, t_s: float, label: str, window_s: float, fg: QColor, bg: QColor) -> None:
        """A labelled vertical line at `t_s`, on both plots; `fg` and `bg` the plot's."""
        crowded = self._markers and t_s - self._markers[-1].t_s < CROWDED * window_s
        level = (self._level + 1) % len(_LABEL_LEVELS) if crowded else 0
        self._level = level
        fill = QColor(bg)
        fill.setAlpha(210)
        pen = pg.mkPen(theme.MARKER, width=1, style=Qt.PenStyle.DashLine)
        top = pg.InfiniteLine(
            pos=t_s,
            angle=90,
            movable=False,
            pen=pen,
            label=label,
            labelOpts={
                "position": _LABEL_LEVELS[level],
                "color": fg,
                "fill": fill,
                "border": pg.mkPen(theme.MARKER),
                "anchors": [(0, 0), (1, 0)],
            },
        )
        bottom = pg.InfiniteLine(pos=t_s, angle=90, movable=False, pen=pen)
        self._plots[0].addItem(top, ignoreBounds=True)
        self._plots[1].addItem(bottom, ignoreBounds=True)
        self._markers.append(_Marker(float(t_s), label, (top, bottom)))

    def drop_before(self, t0: float) -> None:
        """Markers that precede the oldest sample retained go, with their data."""
        while self._markers and self._markers[0].t_s < t0:
            self._remove(self._markers.pop(0))

    def clear(self) -> None:
        self._level = 0
        for marker in self._markers:
            self._remove(marker)
        self._markers.clear()

    def _remove(self, marker: _Marker) -> None:
        self._plots[0].removeItem(marker.lines[0])
        self._plots[1].removeItem(marker.lines[1])


class SloLine:
    """A dotted horizontal line at the p99 target, labelled with it (hidden without one)."""

    def __init__(self, latency_plot: pg.PlotItem) -> None:
        self._plot = latency_plot
        self._line: pg.InfiniteLine | None = None

    def set(self, ms: float | None, y: Callable[[float], Any]) -> float | None:
        """The line at `ms` (None or not above 0: hidden), at `y(ms)` in the axis's units;
        returns the target kept (None: none)."""
        if self._line is None:
            self._line = pg.InfiniteLine(
                angle=0,
                movable=False,
                pen=pg.mkPen(theme.BAD, width=1, style=Qt.PenStyle.DotLine),
                label="SLO",
                labelOpts={"position": 0.02, "color": theme.BAD, "anchors": [(0, 1), (0, 1)]},
            )
            self._plot.addItem(self._line, ignoreBounds=True)
        if ms and ms > 0:
            self._line.setValue(float(y(float(ms))))
            self._line.label.setFormat(f"SLO p99 {ms:g} ms")
            self._line.show()
            return ms
        self._line.hide()
        return None
