"""The tune's trials as a scatter (p50 against cosine to FP32), the latency x accuracy
Pareto front as a line through its trials, the best trial ringed and the accuracy floor
as a line. It draws what it is given."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget

from widgets import theme


class TunePlot(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.glw = pg.GraphicsLayoutWidget()
        self.glw.setBackground(theme.plot_background(self))
        fg = theme.plot_foreground(self)
        self.plot: pg.PlotItem = self.glw.addPlot()
        self.plot.setLabel("bottom", "p50 latency (ms)")
        self.plot.setLabel("left", "cosine to FP32")
        self.plot.showGrid(x=True, y=True, alpha=theme.grid_alpha(self))
        for name in ("left", "bottom"):
            self.plot.getAxis(name).setPen(fg)
            self.plot.getAxis(name).setTextPen(fg)
        self.points = pg.ScatterPlotItem(size=9, brush=pg.mkBrush(theme.THROUGHPUT), pen=None)
        self.front = pg.PlotDataItem(pen=pg.mkPen(theme.P50, width=2))
        self.best = pg.ScatterPlotItem(
            size=18, brush=None, pen=pg.mkPen(theme.P90, width=2.5), symbol="o"
        )
        self.floor = pg.InfiniteLine(
            angle=0, movable=False, pen=pg.mkPen(theme.BAD, style=Qt.PenStyle.DotLine),
            label="floor", labelOpts={"position": 0.9, "color": theme.BAD},
        )  # fmt: skip
        for item in (self.front, self.points, self.best, self.floor):
            self.plot.addItem(item)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.glw)
        self.data: dict[str, Any] = {"trials": [], "front": [], "best": None}

    def set_trials(
        self, trials: list[tuple[int, float, float]], front: list[int], best: int | None
    ) -> None:
        """(number, p50 ms, cosine) of the trials that ran; front and best by number."""
        self.data = {"trials": trials, "front": front, "best": best}
        ok = [(n, x, y) for n, x, y in trials if np.isfinite(x) and np.isfinite(y)]
        self.points.setData(
            [x for _, x, _ in ok], [y for _, _, y in ok], data=[n for n, _, _ in ok]
        )
        on_front = sorted((x, y) for n, x, y in ok if n in front)
        self.front.setData([x for x, _ in on_front], [y for _, y in on_front])
        chosen = [(x, y) for n, x, y in ok if n == best]
        self.best.setData([x for x, _ in chosen], [y for _, y in chosen])

    def set_floor(self, cosine: float) -> None:
        self.floor.setValue(cosine)
        self.floor.label.setFormat(f"floor {cosine:g}")
