"""The latency plot's graphics: a header row (the latency title, the legend), the latency
plot above the throughput plot, x-linked, their titles written across and their axes.

Throughput lives in a short plot below, x-linked to the latency plot, not on a right-hand
axis: two unit scales in one frame invite misreading, and an overlaid ViewBox needs manual
geometry syncing, while a linked plot pans, zooms and exports with the other for free."""

from __future__ import annotations

import time
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QGraphicsSimpleTextItem

from widgets import theme
from widgets.corner_title import corner_title, title_font
from widgets.log_axis import LatencyAxis

AXIS_WIDTH = 62  # px: tick labels up to "10000"
MIN_PLOT_HEIGHT = 230  # px for both plots and the legend: each axis title fits its plot (a banner
# above them at 1024x700 leaves no more)


class TimedView(pg.GraphicsLayoutWidget):
    """A GraphicsLayoutWidget that keeps the GUI-thread CPU time of its last paint."""

    last_paint_s = 0.0

    def paintEvent(self, event: Any) -> None:
        start = time.thread_time()
        super().paintEvent(event)
        self.last_paint_s = time.thread_time() - start


class LatencyView:
    """The two linked plots in one GraphicsLayoutWidget (`glw`), the legend in the row
    above them, right of the latency title (inside the plot it would hide marker labels)."""

    def __init__(self, legend: pg.LegendItem, fg: QColor) -> None:
        self.glw = TimedView()
        header = self.glw.ci.addLayout(row=0, col=0)  # the latency title, the legend
        header.setContentsMargins(0, 0, 0, 0)
        self.axis = LatencyAxis(orientation="left")  # log ms for a generating model
        self.latency_plot: pg.PlotItem = self.glw.addPlot(
            row=1, col=0, axisItems={"left": self.axis}
        )
        self.throughput_plot: pg.PlotItem = self.glw.addPlot(row=2, col=0)
        self.glw.ci.setContentsMargins(4, 0, 10, 4)
        self.glw.setMinimumHeight(MIN_PLOT_HEIGHT)  # shorter, the two axis titles collide
        self.glw.ci.layout.setVerticalSpacing(0)
        self.glw.ci.layout.setRowStretchFactor(1, 3)
        self.glw.ci.layout.setRowStretchFactor(2, 1)
        self.throughput_plot.setXLink(self.latency_plot)
        # titles written across (vertical ones ran into each other in short plots): the
        # latency plot's left of the legend row, above it (its top holds marker labels),
        # the throughput plot's in its own corner
        above = QGraphicsSimpleTextItem("latency (ms)")
        above.setFont(title_font(above.font()))
        above.setBrush(fg)
        self._above = pg.GraphicsWidget()
        above.setParentItem(self._above)
        self._above.setMinimumSize(above.boundingRect().width() + 70, 14)
        above.setPos(AXIS_WIDTH + 4, 0)
        header.addItem(self._above, row=0, col=0)
        left_bottom = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignBottom
        header.layout.setAlignment(self._above, left_bottom)
        header.addItem(legend, row=0, col=1)
        header.layout.setAlignment(legend, Qt.AlignmentFlag.AlignRight)
        header.layout.setColumnStretchFactor(0, 1)
        self.titles = [above, corner_title(self.throughput_plot, "samples/s", fg)]
        self.latency_plot.getAxis("bottom").setStyle(showValues=False)
        self.throughput_plot.setLabel("bottom", "time (s)")
        for plot in self.plots:
            plot.getAxis("left").setWidth(AXIS_WIDTH)
            for name in ("left", "bottom", "right", "top"):  # hidden ones follow the range too
                # An SI prefix would rewrite the axis title (a text layout) at every scroll,
                # and "ks" or "µms" read worse than plain seconds and milliseconds anyway.
                plot.getAxis(name).enableAutoSIPrefix(False)
            plot.vb.disableAutoRange()  # ranges are set here: bounds over 300k points are slow

    @property
    def plots(self) -> tuple[pg.PlotItem, pg.PlotItem]:
        return self.latency_plot, self.throughput_plot

    def set_generation(self, on: bool) -> None:
        """A generating model's titles (a log latency axis, tokens/s below) or an encoder's."""
        self.axis.set_log(on)
        self.titles[0].setText("latency (ms, log scale)" if on else "latency (ms)")
        self._above.setMinimumSize(self.titles[0].boundingRect().width() + 70, 14)
        self.titles[1].setText("tokens/s, each generation" if on else "samples/s")

    def apply_theme(self, fg: QColor, bg: QColor, grid_alpha: float) -> None:
        self.glw.setBackground(bg)
        grid = theme.blend(fg, bg, grid_alpha)  # opaque: alpha lines are slow
        for plot in self.plots:
            plot.showGrid(x=True, y=True)
            for name in ("left", "bottom"):
                axis = plot.getAxis(name)
                axis.setStyle(tickAlpha=255, maxTickLevel=0)
                axis.setZValue(-200)  # grid lines under the data (the ViewBox sits at -100)
                axis.setPen(theme.blend(fg, bg, 0.55))
                axis.setTickPen(grid)
                axis.setTextPen(fg)
        for title in self.titles:
            title.setBrush(fg)
