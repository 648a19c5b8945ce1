"""The serving run's own curves while load runs: queue depth and mean batch size over
time (the latency plot above shows end-to-end latency), with a one-line tally of what
happened to the requests."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from widgets import theme
from widgets.corner_title import corner_title

KEEP_POINTS = 20_000  # ~80 minutes at four reports a second
MIN_PLOT_HEIGHT = 170  # px for both plots: at 90 each was about 20 px, its labels overlapping


class ServingPlot(QWidget):
    """`append(t_s, queued, peak, mean_batch)` per report; `set_tally(text)`."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.tally = QLabel("no load run yet")
        self.tally.setWordWrap(True)
        self.glw = pg.GraphicsLayoutWidget()
        self.glw.setBackground(theme.plot_background(self))
        fg = theme.plot_foreground(self)
        self.depth_plot: pg.PlotItem = self.glw.addPlot(row=0, col=0)
        self.batch_plot: pg.PlotItem = self.glw.addPlot(row=1, col=0)
        self.batch_plot.setXLink(self.depth_plot)
        self.titles = [  # across, in the corner: two short plots' vertical titles collide
            corner_title(self.depth_plot, "queued", fg),
            corner_title(self.batch_plot, "batch", fg),
        ]
        self.batch_plot.setLabel("bottom", "time (s)")
        self.depth_plot.getAxis("bottom").setStyle(showValues=False)
        for plot in (self.depth_plot, self.batch_plot):
            plot.getAxis("left").setWidth(48)
            plot.showGrid(x=True, y=True, alpha=theme.grid_alpha(self))
            for name in ("left", "bottom"):
                plot.getAxis(name).setPen(fg)
                plot.getAxis(name).setTextPen(fg)
        behind = QColor(theme.plot_background(self))
        behind.setAlpha(210)  # readable over the curves it covers
        legend = self.depth_plot.addLegend(
            offset=(-4, 2), labelTextSize="8pt", labelTextColor=fg, brush=pg.mkBrush(behind)
        )
        legend.setColumnCount(2)
        self.peak_curve = self.depth_plot.plot(
            pen=pg.mkPen(theme.P99, width=1), name="peak since last point", stepMode=None
        )
        self.depth_curve = self.depth_plot.plot(
            pen=pg.mkPen(theme.THROUGHPUT, width=1.5), name="queued now"
        )
        self.batch_curve = self.batch_plot.plot(pen=pg.mkPen(theme.P50, width=1.5))
        self.glw.setMinimumHeight(MIN_PLOT_HEIGHT)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tally)
        layout.addWidget(self.glw, 1)
        self._t: list[float] = []
        self._depth: list[float] = []
        self._peak: list[float] = []
        self._batch: list[float] = []

    def clear(self) -> None:
        for series in (self._t, self._depth, self._peak, self._batch):
            series.clear()
        self._redraw()

    def append(self, t_s: float, queued: int, peak: int, mean_batch: float) -> None:
        self._t.append(float(t_s))
        self._depth.append(float(queued))
        self._peak.append(float(peak))
        self._batch.append(float(mean_batch))
        if len(self._t) > KEEP_POINTS:
            for series in (self._t, self._depth, self._peak, self._batch):
                del series[: len(series) - KEEP_POINTS]
        self._redraw()

    def set_tally(self, text: str) -> None:
        theme.set_text_if_changed(self.tally, text)

    def data(self) -> dict[str, np.ndarray]:
        return {
            "t": np.asarray(self._t),
            "queued": np.asarray(self._depth),
            "peak": np.asarray(self._peak),
            "batch": np.asarray(self._batch),
        }

    def _redraw(self) -> None:
        t = np.asarray(self._t)
        self.depth_curve.setData(t, np.asarray(self._depth))
        self.peak_curve.setData(t, np.asarray(self._peak))
        batch = np.asarray(self._batch)
        ok = np.isfinite(batch)
        self.batch_curve.setData(t[ok], batch[ok])
