"""What the latency plot draws, and its legend: per-inference latency and the rolling
p50/p90/p99 (one LinesItem), a generating model's TTFT and TPOT beside them, the
throughput curve below.

Per-inference latency is drawn as its envelope (min and max per two-pixel column) and the
rolling percentiles as each column's last value, reduced in numpy for the visible range
only (widgets/models/visible_samples.py): every spike stays visible, and a frame costs the
GUI thread a few milliseconds at 300k retained points while the engine keeps every core
busy (bench/plot_paint.py measures it)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from widgets import theme
from widgets.generation_layer import NAMES, TPOT_COLOR, TTFT_COLOR, GenerationLayer
from widgets.lines_item import LinesItem
from widgets.models.latency_series import LAT, P50, P90, P99, LatencySeries, T
from widgets.models.ring_buffer import FloatArray
from widgets.models.visible_samples import smooth_rate, visible

PX_PER_COLUMN = 2  # followed data is reduced to one min/max pair per this many pixels
_PERCENTILES = (("p50", theme.P50), ("p90", theme.P90), ("p99", theme.P99))


class LatencyCurves:
    """The lines in the latency plot, the curve in the throughput plot, and the legend's
    entries for them (an encoder's, or a generating model's)."""

    def __init__(
        self,
        latency_plot: pg.PlotItem,
        throughput_plot: pg.PlotItem,
        legend: pg.LegendItem,
        raw_color: QColor,
    ) -> None:
        self._latency_plot = latency_plot
        self.legend = legend
        self.lines = LinesItem()
        latency_plot.addItem(self.lines)
        self.lines.add_line("latency", pg.mkPen(raw_color, width=1))
        for key, color in _PERCENTILES:
            self.lines.add_line(key, pg.mkPen(color, width=1))
        for key, color in (("ttft", TTFT_COLOR), ("tpot", TPOT_COLOR)):  # generations only
            self.lines.add_line(key, pg.mkPen(color, width=1))
        # Legend entries only (never added to a plot): the legend draws their pens.
        self._legend_items = {
            "latency": pg.PlotDataItem(name="per inference"),
            "p50": pg.PlotDataItem(name="p50", pen=pg.mkPen(theme.P50, width=1)),
            "p90": pg.PlotDataItem(name="p90", pen=pg.mkPen(theme.P90, width=1)),
            "p99": pg.PlotDataItem(name="p99", pen=pg.mkPen(theme.P99, width=1)),
            "ttft": pg.PlotDataItem(name=NAMES["ttft"], pen=pg.mkPen(TTFT_COLOR, width=2)),
            "tpot": pg.PlotDataItem(name=NAMES["tpot"], pen=pg.mkPen(TPOT_COLOR, width=2)),
        }
        self.throughput_curve: pg.PlotDataItem = throughput_plot.plot(
            pen=pg.mkPen(theme.THROUGHPUT, width=1),
            skipFiniteCheck=True,
            symbolSize=5,
            symbolPen=None,
            symbolBrush=theme.THROUGHPUT,  # symbols: a generating model's
        )

    # ------------------------------------------------------------------------------ legend
    def fill_legend(self, generating: bool, fg: QColor) -> None:
        """The legend's entries: an encoder's (per inference, p50, p90, p99) or a generating
        model's (end to end, TTFT, TPOT, and the end to end's percentiles)."""
        on = generating
        self.legend.clear()
        self.legend.setColumnCount(6 if on else 4)
        keys = ("latency", "ttft", "tpot", "p50", "p90", "p99") if on else (
            "latency", "p50", "p90", "p99")  # fmt: skip
        names = {"latency": "end to end"} if on else {}
        for key in keys:
            item = self._legend_items[key]
            self.legend.addItem(item, names.get(key, item.name()))
        hint = self.legend.layout.effectiveSizeHint(Qt.SizeHint.PreferredSize)
        self.legend.setFixedWidth(hint.width())
        self.legend.setFixedHeight(hint.height())
        self.legend.setLabelTextColor(fg)

    def set_generation(self, on: bool, fg: QColor) -> None:
        """A generating model's styles (tokens/s as points, the end to end's percentiles
        dashed) and legend, or an encoder's (the generations' lines gone)."""
        self.throughput_curve.setSymbol("o" if on else None)
        # the end to end's percentiles dashed beside three series of points (the p90's
        # amber beside TTFT's orange read as one more series)
        style = Qt.PenStyle.DashLine if on else Qt.PenStyle.SolidLine
        for key, color in _PERCENTILES:
            pen = pg.mkPen(color, width=1, style=style)
            self.lines.set_pen(key, pen)
            self._legend_items[key].setPen(pen)
        if not on:  # an encoder's bins again; the generations' lines go
            self.throughput_curve.setData([], [], connect="all")
            for name in ("ttft", "tpot"):
                self.lines.set_line(name, np.zeros(0), np.zeros(0))
                self.lines.set_dots(name, None)
        self.fill_legend(on, fg)

    def apply_theme(self, fg: QColor, raw_color: QColor) -> None:
        self.legend.setLabelTextColor(fg)
        for _, label in self.legend.items:
            label.setText(label.text)  # setLabelTextColor alone does not re-render the text
        pen = pg.mkPen(raw_color, width=1)
        self.lines.set_pen("latency", pen)
        self._legend_items["latency"].setPen(pen)

    # ------------------------------------------------------------------------------ data
    def clear(self) -> None:
        self.lines.clear()
        self.throughput_curve.setData([], [])

    def drawn(self, name: str) -> tuple[FloatArray, FloatArray]:
        """(x, y) last handed to the view for a line's name or "throughput"."""
        if name == "throughput":
            x, y = self.throughput_curve.getData()
            return (np.zeros(0), np.zeros(0)) if x is None else (x, y)
        return self.lines.data(name)

    def draw(
        self,
        series: LatencySeries,
        generation: GenerationLayer,
        breaks: list[float],
        x0: float,
        x1: float,
        following: bool,
    ) -> None:
        """The samples in view: reduced to the pixel columns when there are more of them
        than columns; else every one joined by a line and, when few, each one a dot (a run
        below one inference per second drew nothing: no two samples were within 1 s)."""
        samples = series.buffer
        t = samples.view(T)
        width = self._latency_plot.vb.width()
        columns = max(64, int(width) // PX_PER_COLUMN)
        pcts = {name: samples.view(col) for name, col in (("p50", P50), ("p90", P90), ("p99", P99))}
        shown = visible(t, samples.view(LAT), pcts, x0, x1, width, columns, breaks)
        y = generation.y  # log10 for a generating model, else as it is
        for name, (x, v, mask) in shown.lines.items():
            self.lines.set_line(name, x, y(v), mask)
        dots = shown.dots
        self.lines.set_dots("latency", *((dots[0], y(dots[1])) if dots else (None, None)))
        in_view = shown.lines["latency"][1]  # its envelope: the same max as the samples'
        top = float((in_view if following else samples.view(LAT)).max())
        if generation.on:
            self._draw_generations(
                series, generation, breaks, (x0, x1), following, (width, columns)
            )
            return
        self.lines.finish((float(t[0]), float(t[-1]), 0.0, top))
        bt, bv = series.throughput()
        j0 = max(0, int(np.searchsorted(bt, x0)) - 1)
        j1 = min(bt.size, int(np.searchsorted(bt, x1, side="right")) + 1)
        if following:
            bt, bv = bt[j0:j1], bv[j0:j1]  # else its auto-range sees every bin
        self.throughput_curve.setData(bt, smooth_rate(bv, shown.spacing_s))

    def _draw_generations(
        self,
        series: LatencySeries,
        gen: GenerationLayer,
        breaks: list[float],
        x_range: tuple[float, float],
        following: bool,
        pixels: tuple[float, int],
    ) -> None:
        """A generating model's TTFT and TPOT (each generation a point) beside the end to
        end `draw` drew, and tokens/s per generation below (joined, broken at pauses)."""
        (x0, x1), (width, columns) = x_range, pixels
        for name, (x, y, mask, dots) in gen.lines(x0, x1, width, columns, breaks).items():
            self.lines.set_line(name, x, y, mask)
            self.lines.set_dots(name, *(dots or (None, None)))
        self.lines.finish(gen.extent(series.buffer.view(T), series.buffer.view(LAT)))
        rt, rate, connect = gen.rates_shown(x0, x1, following, breaks)
        self.throughput_curve.setData(rt, rate, connect=connect)
