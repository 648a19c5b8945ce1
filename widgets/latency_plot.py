"""Live latency curve: per-inference samples, rolling p50/p90/p99, throughput, config markers.

Throughput lives in a short plot below, x-linked to the latency plot, not on a right-hand
axis: two unit scales in one frame invite misreading, and an overlaid ViewBox needs manual
geometry syncing, while a linked plot pans, zooms and exports with the other for free.
Per-inference latency is drawn as its envelope (min and max per two-pixel column) and the
rolling percentiles as each column's last value, reduced here in numpy for the visible range
only and drawn by one LinesItem: every spike stays visible, and a frame costs the GUI thread
a few milliseconds at 300k retained points while the engine keeps every core busy
(bench/plot_paint.py measures it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QColor, QShowEvent
from PySide6.QtWidgets import (
    QGraphicsSimpleTextItem,
    QHBoxLayout,
    QLabel,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from widgets import theme
from widgets.corner_title import corner_title, title_font
from widgets.generation_layer import (
    GENERATION_TEMPLATE,
    GENERATION_TIP,
    NAMES,
    TPOT_COLOR,
    TTFT_COLOR,
    GenerationLayer,
)
from widgets.lines_item import LinesItem
from widgets.log_axis import LatencyAxis
from widgets.machine_badge import MachineBadge
from widgets.models.latency_series import (
    LAT,
    P50,
    P90,
    P99,
    LatencySeries,
    T,
    calm_top,
    follow_range,
    window_text,
)
from widgets.models.ring_buffer import FloatArray
from widgets.models.visible_samples import smooth_rate, visible
from widgets.numbers import figure
from widgets.pause_bands import PauseBands
from widgets.plot_export import check_format, export_layout

AXIS_WIDTH = 62  # px: tick labels up to "10000"
STATS_HZ = 2.0  # updates of the numbers above the plot
PX_PER_COLUMN = 2  # followed data is reduced to one min/max pair per this many pixels
MIN_PAINT_HZ = 2.0  # the frame rate never drops below this, whatever a frame costs
MIN_PLOT_HEIGHT = 230  # px for both plots and the legend: each axis title fits its plot (a banner
# above them at 1024x700 leaves no more)


class _TimedView(pg.GraphicsLayoutWidget):
    """A GraphicsLayoutWidget that keeps the GUI-thread CPU time of its last paint."""

    last_paint_s = 0.0

    def paintEvent(self, event: Any) -> None:
        start = time.thread_time()
        super().paintEvent(event)
        self.last_paint_s = time.thread_time() - start


_LABEL_LEVELS = (0.97, 0.86, 0.75)  # marker label heights, staggered when markers crowd
_STATS_TEMPLATE = (  # the longest header text: its label's fixed size
    "p50 888.8 ms · 88,888 samples/s · p90 888.8 ms · p99 888.8 ms\n"
    "over the last 8,888 inferences (88.8 min) of 888,888,888 since the config change"
)
_STATS_TIP = (
    "p50/p90/p99 and samples/s over the running config's last inferences (the line "
    "below says how many, over how long); the Runs table's are over whole runs"
)


@dataclass
class _Marker:
    t_s: float
    label: str
    lines: tuple[pg.InfiniteLine, pg.InfiniteLine]


class LatencyPlot(QWidget):
    """Feed with `append`; a timer paints when new data arrived, at `paint_hz` at most.

    Frames cost CPU that, with the engine on every core, comes out of the engine's
    throughput, sometimes more than the frame's own CPU time (an intra-op thread pool waits
    for its slowest thread): the frame rate adapts so painting stays within `cpu_budget` of
    one core (a frame of 5 ms at 2.5%: 5 Hz; of 2 ms: the full 10 Hz), never below
    MIN_PAINT_HZ."""

    follow_changed = Signal(bool)

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        capacity: int = 300_000,
        percentile_window: int = 200,
        window_s: float = 60.0,
        paint_hz: float = 10.0,
        cpu_budget: float = 0.025,
        throughput_capacity: int = 20_000,
    ) -> None:
        super().__init__(parent)
        self.window_s = float(window_s)
        self.series = LatencySeries(capacity, percentile_window, throughput_capacity)
        # a generating model's TTFT, TPOT and tokens/s per generation (off: an encoder's)
        self.generation = GenerationLayer(throughput_capacity, percentile_window)
        self._samples = self.series.buffer  # read by the view: t, latency, p50, p90, p99
        self._dirty = False
        self._following = True
        self._markers: list[_Marker] = []
        self._marker_level = 0
        self._y_tops = [0.0, 0.0]  # followed y range tops: latency, throughput
        self.stepped_follow = True  # see follow_range
        self._slo_line: pg.InfiniteLine | None = None
        # the trailing-window figures the header shows now: the status bar repeats these
        # (computed apart, a moment later, the two read different p50s)
        self.shown_stats: dict[str, Any] = {"count": 0}
        self.slo_ms: float | None = None

        self._glw = _TimedView()
        # The legend gets a row of its own above the plot: inside it would hide marker labels.
        self.legend = pg.LegendItem(colCount=4, verSpacing=-6)
        self._header = self._glw.ci.addLayout(row=0, col=0)  # the latency title, the legend
        self._header.setContentsMargins(0, 0, 0, 0)
        self.axis = LatencyAxis(orientation="left")  # log ms for a generating model
        self.latency_plot: pg.PlotItem = self._glw.addPlot(
            row=1, col=0, axisItems={"left": self.axis}
        )
        self.throughput_plot: pg.PlotItem = self._glw.addPlot(row=2, col=0)
        self._glw.ci.setContentsMargins(4, 0, 10, 4)
        self._glw.setMinimumHeight(MIN_PLOT_HEIGHT)  # shorter, the two axis titles collide
        self._glw.ci.layout.setVerticalSpacing(0)
        self._glw.ci.layout.setRowStretchFactor(1, 3)
        self._glw.ci.layout.setRowStretchFactor(2, 1)
        self.throughput_plot.setXLink(self.latency_plot)
        fg = theme.plot_foreground(self)
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
        self._header.addItem(self._above, row=0, col=0)
        left_bottom = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignBottom
        self._header.layout.setAlignment(self._above, left_bottom)
        self._header.addItem(self.legend, row=0, col=1)
        self._header.layout.setAlignment(self.legend, Qt.AlignmentFlag.AlignRight)
        self._header.layout.setColumnStretchFactor(0, 1)
        self.titles = [above, corner_title(self.throughput_plot, "samples/s", fg)]
        self.latency_plot.getAxis("bottom").setStyle(showValues=False)
        self.throughput_plot.setLabel("bottom", "time (s)")
        for plot in (self.latency_plot, self.throughput_plot):
            plot.getAxis("left").setWidth(AXIS_WIDTH)
            for name in ("left", "bottom", "right", "top"):  # hidden ones follow the range too
                # An SI prefix would rewrite the axis title (a text layout) at every scroll,
                # and "ks" or "µms" read worse than plain seconds and milliseconds anyway.
                plot.getAxis(name).enableAutoSIPrefix(False)
            plot.vb.disableAutoRange()  # ranges are set here: bounds over 300k points are slow
            plot.vb.sigRangeChangedManually.connect(self._on_manual_range)

        self.lines = LinesItem()
        self.latency_plot.addItem(self.lines)
        self.lines.add_line("latency", pg.mkPen(theme.raw_latency_color(self), width=1))
        for key, color in (("p50", theme.P50), ("p90", theme.P90), ("p99", theme.P99)):
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
        self._fill_legend()
        self.throughput_curve: pg.PlotDataItem = self.throughput_plot.plot(
            pen=pg.mkPen(theme.THROUGHPUT, width=1),
            skipFiniteCheck=True,
            symbolSize=5,
            symbolPen=None,
            symbolBrush=theme.THROUGHPUT,  # symbols: a generating model's
        )
        self.latency_plot.vb.sigXRangeChanged.connect(self._on_x_range)
        # timing pauses (profiling passes): shaded and labelled, lines broken across them
        self.pauses = PauseBands(
            self.latency_plot, self.throughput_plot, theme.plot_foreground(self)
        )

        self.follow_action = QAction("Follow latest", self, checkable=True, checked=True)
        self.follow_action.setToolTip("Keep the last seconds in view (double-click the plot)")
        self.follow_action.toggled.connect(self.set_follow)
        for plot in (self.latency_plot, self.throughput_plot):
            plot.vb.menu.addSeparator()
            plot.vb.menu.addAction(self.follow_action)
        self._glw.scene().sigMouseClicked.connect(self._on_click)

        self.stats_label = theme.make_steady(QLabel("no samples yet"), _STATS_TEMPLATE)
        self.stats_label.setToolTip(_STATS_TIP)
        self._stats_at = 0.0  # monotonic time of the last stats text
        follow_button = QToolButton()
        follow_button.setDefaultAction(self.follow_action)
        follow_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        header = QHBoxLayout()
        header.setContentsMargins(6, 2, 6, 0)
        header.addWidget(self.stats_label)
        header.addStretch(1)
        self.machine = MachineBadge()  # how busy the machine was: beside the figures
        right = QVBoxLayout()  # stacked: the header stays as narrow as before
        right.setContentsMargins(0, 0, 0, 0)
        right.setSpacing(0)
        right.addWidget(self.machine, 0, Qt.AlignmentFlag.AlignRight)
        right.addWidget(follow_button, 0, Qt.AlignmentFlag.AlignRight)
        header.addLayout(right)
        layout = QVBoxLayout()
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(header)
        layout.addWidget(self._glw, 1)
        self.setLayout(layout)
        self._painting = False
        self._apply_theme()

        self.max_paint_hz = float(paint_hz)
        self.cpu_budget = float(cpu_budget)
        self._frame_s = 0.0  # smoothed GUI CPU time of one frame (data + paint)
        self._data_s = 0.0  # CPU time of the last paint_now
        self._frames = 0  # frames made
        self._timer = QTimer(self)
        self._timer.setInterval(max(1, round(1000 / paint_hz)))
        self._timer.timeout.connect(self._on_timer)
        self._timer.start()

    # ----------------------------------------------------------------------------- data in
    def append(self, t_s: npt.ArrayLike, latency_ms: npt.ArrayLike, batch: int) -> None:
        """Per-inference points: seconds since the session started (non-decreasing) and ms."""
        t = np.asarray(t_s, dtype=np.float64)
        if t.size:
            self.pauses.log.samples_from(float(t[0]))  # samples again: a pause has ended
        if self.series.append(t, latency_ms, batch):
            self._dirty = True

    def start_segment(self) -> None:
        """A config change: the numbers above the plot restart from its first sample."""
        self.series.start_segment()
        self.generation.series.start_segment()
        self._stats_at = 0.0

    def set_generation(self, on: bool) -> None:
        """A generating model runs (on) or another model (off). On: its generations'
        TTFT and TPOT join the end-to-end points `append` gives, on a log latency axis,
        and the plot below reads tokens/s per generation instead of samples/s."""
        if on == self.generation.on:
            return
        self.generation.on = on
        self.axis.set_log(on)
        self.titles[0].setText("latency (ms, log scale)" if on else "latency (ms)")
        self._above.setMinimumSize(self.titles[0].boundingRect().width() + 70, 14)
        self.titles[1].setText("tokens/s, each generation" if on else "samples/s")
        self.throughput_curve.setSymbol("o" if on else None)
        # the end to end's percentiles dashed beside three series of points (the p90's
        # amber beside TTFT's orange read as one more series)
        style = Qt.PenStyle.DashLine if on else Qt.PenStyle.SolidLine
        for key, color in (("p50", theme.P50), ("p90", theme.P90), ("p99", theme.P99)):
            pen = pg.mkPen(color, width=1, style=style)
            self.lines.set_pen(key, pen)
            self._legend_items[key].setPen(pen)
        theme.make_steady(self.stats_label, GENERATION_TEMPLATE if on else _STATS_TEMPLATE)
        self.stats_label.setToolTip(GENERATION_TIP if on else _STATS_TIP)
        if not on:  # an encoder's bins again; the generations' lines go
            self.throughput_curve.setData([], [], connect="all")
            for name in ("ttft", "tpot"):
                self.lines.set_line(name, np.zeros(0), np.zeros(0))
                self.lines.set_dots(name, None)
        self._fill_legend()
        self.set_slo(self.slo_ms)  # its height in the axis's units
        self._y_tops = [0.0, 0.0]
        self.latency_plot.vb.setYRange(*self.generation.y_range(1.0, 1e3, (0.0, 0.0)) if on
                                       else (0.0, 1.0), padding=0)  # fmt: skip
        self._stats_at = 0.0
        self._dirty = True

    def append_generation(self, t_s: float, steps_ms: npt.ArrayLike, batch: int) -> None:
        """One generation of a generating model: its start (s on the plot's clock, as
        `append`'s) and its passes in ms (the first to the first token, then each decode
        step's); `batch` sequences at once."""
        self.generation.append(t_s, steps_ms, batch)
        self._dirty = True

    def add_marker(self, t_s: float, label: str) -> None:
        """A labelled vertical line at a config change; dropped with the data it precedes."""
        crowded = self._markers and t_s - self._markers[-1].t_s < 0.15 * self.window_s
        level = (self._marker_level + 1) % len(_LABEL_LEVELS) if crowded else 0
        self._marker_level = level
        fg, bg = theme.plot_foreground(self), QColor(theme.plot_background(self))
        bg.setAlpha(210)
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
                "fill": bg,
                "border": pg.mkPen(theme.MARKER),
                "anchors": [(0, 0), (1, 0)],
            },
        )
        bottom = pg.InfiniteLine(pos=t_s, angle=90, movable=False, pen=pen)
        self.latency_plot.addItem(top, ignoreBounds=True)
        self.throughput_plot.addItem(bottom, ignoreBounds=True)
        self._markers.append(_Marker(float(t_s), label, (top, bottom)))

    def add_pause(self, t_s: float, label: str = "profiling", relabel: bool = False) -> None:
        """Timing stops here until the next samples arrive (a profiling pass, or timing
        paused): the gap is shaded and labelled, and no line is drawn across it. With
        `relabel`, a pause already open takes this label (paused during a pass)."""
        self.pauses.begin(t_s, label, relabel)
        self._dirty = True

    def set_slo(self, ms: float | None) -> None:
        """A horizontal line at the p99 target (None: none)."""
        if self._slo_line is None:
            self._slo_line = pg.InfiniteLine(
                angle=0,
                movable=False,
                pen=pg.mkPen(theme.BAD, width=1, style=Qt.PenStyle.DotLine),
                label="SLO",
                labelOpts={"position": 0.02, "color": theme.BAD, "anchors": [(0, 1), (0, 1)]},
            )
            self.latency_plot.addItem(self._slo_line, ignoreBounds=True)
        if ms and ms > 0:
            self._slo_line.setValue(float(self.generation.y(float(ms))))
            self._slo_line.label.setFormat(f"SLO p99 {ms:g} ms")
            self._slo_line.show()
        else:
            self._slo_line.hide()
        self.slo_ms = ms if ms and ms > 0 else None

    def clear(self) -> None:
        """Forget all samples, bins and markers (a new session); resume following."""
        self.series.clear()
        self.generation.series.clear()
        self._y_tops = [0.0, 0.0]
        self._marker_level = 0
        for marker in self._markers:
            self._remove_marker_items(marker)
        self._markers.clear()
        self.lines.clear()
        self.pauses.clear()
        self.throughput_curve.setData([], [])
        self.stats_label.setText("no samples yet")
        self.shown_stats = {"count": 0}
        self._stats_at = 0.0
        self._dirty = False
        self.set_follow(True)

    # ----------------------------------------------------------------------------- queries
    @property
    def plot_item(self) -> pg.PlotItem:
        """The latency PlotItem (x-link other views to it, e.g. TelemetryStrip.set_x_link)."""
        return self.latency_plot

    @property
    def capacity(self) -> int:
        return self._samples.capacity

    def samples(self) -> tuple[FloatArray, FloatArray]:
        """(t_s, latency_ms) retained, oldest first: views valid until the next append."""
        return self.series.samples()

    def throughput(self) -> tuple[FloatArray, FloatArray]:
        """(bin centre s, samples/s) of the completed 0.5 s bins."""
        return self.series.throughput()

    def drawn(self, name: str) -> tuple[FloatArray, FloatArray]:
        """(x, y) last handed to the view for "latency", "p50", "p90", "p99", a generating
        model's "ttft" and "tpot" (reduced to the pixel columns when there are more points
        than columns; log10(ms) while a generating model runs) or "throughput"."""
        if name == "throughput":
            x, y = self.throughput_curve.getData()
            return (np.zeros(0), np.zeros(0)) if x is None else (x, y)
        return self.lines.data(name)

    def rolling_percentiles(self) -> FloatArray:
        """(3, n) trailing-window p50/p90/p99 per retained sample (as of the last paint)."""
        return self.series.rolling_percentiles()

    @property
    def markers(self) -> list[tuple[float, str]]:
        return [(m.t_s, m.label) for m in self._markers]

    def latest_stats(self) -> dict[str, Any]:
        """count and p50/p90/p99 (ms) of the trailing window; NaN values when empty."""
        return self.series.latest_stats()

    # ----------------------------------------------------------------------------- follow
    @property
    def following(self) -> bool:
        return self._following

    def set_stepped_follow(self, on: bool) -> None:
        """Followed range in steps (labels hold still, frames cost less) or scrolling with
        every frame."""
        self.stepped_follow = bool(on)
        self._dirty = True

    def set_follow(self, on: bool) -> None:
        """Follow the last `window_s` seconds, or leave the range to the user."""
        if on == self._following:
            return
        self._following = on
        self.follow_action.setChecked(on)
        self.throughput_plot.vb.enableAutoRange(axis="y", enable=not on)
        self.throughput_plot.vb.setAutoVisible(y=not on)
        self._dirty = True  # following hands over a window, not following everything
        self.paint_now()
        self.follow_changed.emit(on)

    def show_all(self) -> None:
        """Stop following and fit everything retained into view (a recorded session)."""
        self.set_follow(False)
        self.paint_now()
        self.latency_plot.vb.enableAutoRange()

    def _on_x_range(self, *_: object) -> None:
        """A pan, zoom or auto-range while not following: reduce for the new range now."""
        if not self._following and not self._painting:
            self._dirty = True
            self.paint_now()

    def _on_manual_range(self, *_: object) -> None:
        self.set_follow(False)

    def _on_click(self, event: Any) -> None:
        if event.double():
            self.set_follow(True)

    # ----------------------------------------------------------------------------- paint
    def _on_timer(self) -> None:
        if not self.isVisible():  # a hidden plot (another tab) catches up when shown
            return
        if self.pauses.log.open is not None:  # its band grows with the clock
            self._dirty = True
        if self._data_s:  # the previous frame is complete: its data and its paint
            frame = self._data_s + self._glw.last_paint_s
            self._frame_s = frame if not self._frame_s else 0.8 * self._frame_s + 0.2 * frame
            self._data_s = 0.0
            self._timer.setInterval(round(1000 / self.paint_hz))
        frames, start = self._frames, time.thread_time()
        self.paint_now()
        if self._frames != frames:  # a frame was made (not just an idle tick)
            self._data_s = max(time.thread_time() - start, 1e-6)

    @property
    def paint_hz(self) -> float:
        """Frames per second now: as many as `cpu_budget` affords, within the limits."""
        if not self._frame_s:
            return self.max_paint_hz
        affordable = self.cpu_budget / self._frame_s
        return max(min(self.max_paint_hz, affordable), min(MIN_PAINT_HZ, self.max_paint_hz))

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.paint_now()

    def paint_now(self) -> None:
        """Hand the new data to the plot items (the timer calls this; tests and exports may)."""
        if not self._dirty or self._painting:
            return
        self._dirty = False
        self._painting = True
        try:
            self.series.update_percentiles()
            t = self._samples.view(T)
            if t.size == 0:
                return
            if self._following:
                x0, x1 = self._apply_follow()
            else:
                x0, x1 = self.latency_plot.vb.viewRange()[0]
            self._set_lines(x0, x1)
            (left, _), (bottom, _) = self.latency_plot.vb.viewRange()
            self.pauses.update(float(t[0]), float(t[-1]), bottom, left)
            while self._markers and self._markers[0].t_s < t[0]:
                self._remove_marker_items(self._markers.pop(0))
            # pyqtgraph moves its view transforms when a paint begins, and moving them
            # schedules a second paint of the whole view; moved now, one paint draws it.
            self._glw.scene().prepareForPaint()
            self._set_stats_text()
            self._frames += 1
        finally:
            self._painting = False

    def _set_lines(self, x0: float, x1: float) -> None:
        """The samples in view: reduced to the pixel columns when there are more of them
        than columns; else every one joined by a line and, when few, each one a dot (a run
        below one inference per second drew nothing: no two samples were within 1 s)."""
        t = self._samples.view(T)
        width = self.latency_plot.vb.width()
        columns = max(64, int(width) // PX_PER_COLUMN)
        pcts = {
            name: self._samples.view(col)
            for name, col in (("p50", P50), ("p90", P90), ("p99", P99))
        }
        breaks = [p.start_s for p in self.pauses.log.pauses]
        shown = visible(t, self._samples.view(LAT), pcts, x0, x1, width, columns, breaks)
        y = self.generation.y  # log10 for a generating model, else as it is
        for name, (x, v, mask) in shown.lines.items():
            self.lines.set_line(name, x, y(v), mask)
        dots = shown.dots
        self.lines.set_dots("latency", *((dots[0], y(dots[1])) if dots else (None, None)))
        in_view = shown.lines["latency"][1]  # its envelope: the same max as the samples'
        top = float((in_view if self._following else self._samples.view(LAT)).max())
        if self.generation.on:
            self._set_generation_lines(x0, x1, width, columns, breaks)
            return
        self.lines.finish((float(t[0]), float(t[-1]), 0.0, top))
        bt, bv = self.throughput()
        j0 = max(0, int(np.searchsorted(bt, x0)) - 1)
        j1 = min(bt.size, int(np.searchsorted(bt, x1, side="right")) + 1)
        if self._following:
            bt, bv = bt[j0:j1], bv[j0:j1]  # else its auto-range sees every bin
        self.throughput_curve.setData(bt, smooth_rate(bv, shown.spacing_s))

    def _set_generation_lines(
        self, x0: float, x1: float, width: float, columns: int, breaks: list[float]
    ) -> None:
        """A generating model's TTFT and TPOT (each generation a point) beside the end to
        end `_set_lines` drew, and tokens/s per generation below (joined, broken at pauses)."""
        gen = self.generation
        for name, (x, y, mask, dots) in gen.lines(x0, x1, width, columns, breaks).items():
            self.lines.set_line(name, x, y, mask)
            self.lines.set_dots(name, *(dots or (None, None)))
        self.lines.finish(gen.extent(self._samples.view(T), self._samples.view(LAT)))
        rt, rate, connect = gen.rates_shown(x0, x1, self._following, breaks)
        self.throughput_curve.setData(rt, rate, connect=connect)

    def _set_stats_text(self) -> None:
        """The trailing-window numbers above the plot, at most STATS_HZ times a second
        (digits changing ten times a second cannot be read, and each change costs a
        text layout)."""
        now = time.monotonic()
        if now - self._stats_at < 1.0 / STATS_HZ and self._stats_at:
            return
        self._stats_at = now
        stats = self.latest_stats()
        if not stats["count"]:
            return
        if self.generation.on:
            self.shown_stats = self.generation.stats(stats)
            text = self.generation.header(stats, self._samples.total)
            theme.set_text_if_changed(self.stats_label, text)
            return
        self.shown_stats = stats
        parts = [
            f"<b style='color:{color}'>{q}</b> {figure(stats[q])} ms"
            for q, color in (("p50", theme.P50), ("p90", theme.P90), ("p99", theme.P99))
        ]
        rate = stats["samples_per_s"]
        parts.insert(1, f"{figure(rate, 4)} samples/s")
        window = window_text(stats, self._samples.total)  # two lines: fits 1024 px
        text = " · ".join(parts) + f"<br>{window}"
        theme.set_text_if_changed(self.stats_label, text)

    def _apply_follow(self) -> tuple[float, float]:
        """Show the last `window_s` seconds, y from 0 to the visible maximum; returns the
        x range.

        Both ranges move in steps (`follow_range`, `calm_top`): an axis whose range is
        unchanged keeps its drawn ticks and grid (redrawing them was half of a frame's
        cost), and labels that slide at every frame are hard to read anyway."""
        t, lat = self._samples.view(T), self._samples.view(LAT)
        if t.size == 0:
            return 0.0, 1.0
        (vx0, vx1), (_, vy1) = self.latency_plot.vb.viewRange()
        x0, x1 = follow_range(
            float(t[0]), float(t[-1]), self.window_s, (vx0, vx1), self.stepped_follow
        )
        i0 = int(np.searchsorted(t, x0))
        if self.generation.on:
            return self._follow_generation(x0, x1, lat[i0:])
        y1 = float(lat[i0:].max()) if i0 < t.size else 1.0
        self._y_tops[0] = calm_top(self._y_tops[0], max(y1, 1e-3))
        if (x0, x1, self._y_tops[0]) != (vx0, vx1, vy1):  # unchanged: no axis redraw
            self.latency_plot.vb.setRange(xRange=(x0, x1), yRange=(0.0, self._y_tops[0]), padding=0)
        bt, bv = self.series.throughput()
        j0 = int(np.searchsorted(bt, x0))
        top = float(bv[j0:].max()) if j0 < bt.size else 1.0
        self._y_tops[1] = calm_top(self._y_tops[1], max(top, 1.0))
        if self.throughput_plot.vb.viewRange()[1] != [0.0, self._y_tops[1]]:
            self.throughput_plot.vb.setYRange(0.0, self._y_tops[1], padding=0)
        return x0, x1

    def _follow_generation(self, x0: float, x1: float, e2e: FloatArray) -> tuple[float, float]:
        """`_apply_follow` for a generating model: y over every series in view on the log
        axis, tokens/s per generation below."""
        vb = self.latency_plot.vb
        (vx0, vx1), (vy0, vy1) = vb.viewRange()
        y0, y1 = self.generation.y_range(*self.generation.in_view(x0, x1, e2e), (vy0, vy1))
        if (x0, x1, y0, y1) != (vx0, vx1, vy0, vy1):  # unchanged: no axis redraw
            vb.setRange(xRange=(x0, x1), yRange=(y0, y1), padding=0)
        self._y_tops[1] = calm_top(self._y_tops[1], self.generation.rate_top(x0))
        if self.throughput_plot.vb.viewRange()[1] != [0.0, self._y_tops[1]]:
            self.throughput_plot.vb.setYRange(0.0, self._y_tops[1], padding=0)
        return x0, x1

    def _fill_legend(self) -> None:
        """The legend's entries: an encoder's (per inference, p50, p90, p99) or a generating
        model's (end to end, TTFT, TPOT, and the end to end's percentiles)."""
        on = self.generation.on
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
        self.legend.setLabelTextColor(theme.plot_foreground(self))

    def _remove_marker_items(self, marker: _Marker) -> None:
        self.latency_plot.removeItem(marker.lines[0])
        self.throughput_plot.removeItem(marker.lines[1])

    # ----------------------------------------------------------------------------- export
    def export_image(self, path: str) -> None:
        """Save both plots as PNG or SVG, chosen by the file extension (ValueError otherwise)."""
        check_format(path)
        self.paint_now()
        export_layout(self._glw, path, theme.plot_background(self), "OpScope latency")

    # ----------------------------------------------------------------------------- theme
    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange:
            self._apply_theme()
        super().changeEvent(event)

    def _apply_theme(self) -> None:
        fg, bg = theme.plot_foreground(self), theme.plot_background(self)
        self._glw.setBackground(bg)
        grid = theme.blend(fg, bg, theme.grid_alpha(self))  # opaque: alpha lines are slow
        for plot in (self.latency_plot, self.throughput_plot):
            plot.showGrid(x=True, y=True)
            for name in ("left", "bottom"):
                axis = plot.getAxis(name)
                axis.setStyle(tickAlpha=255, maxTickLevel=0)
                axis.setZValue(-200)  # grid lines under the data (the ViewBox sits at -100)
                axis.setPen(theme.blend(fg, bg, 0.55))
                axis.setTickPen(grid)
                axis.setTextPen(fg)
        self.legend.setLabelTextColor(fg)
        for title in getattr(self, "titles", ()):
            title.setBrush(fg)
        for _, label in self.legend.items:
            label.setText(label.text)  # setLabelTextColor alone does not re-render the text
        if hasattr(self, "lines"):
            pen = pg.mkPen(theme.raw_latency_color(self), width=1)
            self.lines.set_pen("latency", pen)
            self._legend_items["latency"].setPen(pen)
