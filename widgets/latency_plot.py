"""Live latency curve: per-inference samples, rolling p50/p90/p99, throughput, config markers.

This widget takes the data in, paints it on a timer at a frame rate it can afford, and
answers what it shows; its parts are named for what they do: the two linked plots
(latency_view.py), what they draw and the legend (latency_curves.py), the followed range
(latency_follow.py), the config-change markers and the SLO line (latency_markers.py), the
numbers above it (latency_stats.py), the frame rate (latency_pacing.py), the shaded pauses
(pause_bands.py).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import numpy.typing as npt
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Signal
from PySide6.QtGui import QAction, QShowEvent
from PySide6.QtWidgets import QVBoxLayout, QWidget

from widgets import theme
from widgets.generation_layer import GenerationLayer
from widgets.latency_curves import PX_PER_COLUMN as PX_PER_COLUMN
from widgets.latency_curves import LatencyCurves
from widgets.latency_follow import FollowedRange
from widgets.latency_markers import ChangeMarkers, SloLine
from widgets.latency_pacing import MIN_PAINT_HZ as MIN_PAINT_HZ
from widgets.latency_pacing import PacedPainting
from widgets.latency_stats import StatsRow
from widgets.latency_view import LatencyView
from widgets.models.latency_series import LatencySeries, T
from widgets.models.ring_buffer import FloatArray
from widgets.pause_bands import PauseBands
from widgets.plot_export import check_format, export_layout

STATS_HZ = 2.0  # updates of the numbers above the plot


class LatencyPlot(PacedPainting, QWidget):
    """Feed with `append`; a timer paints when new data arrived, at `paint_hz` at most
    (the rate a CPU budget affords: latency_pacing.py)."""

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
        self.stepped_follow = True  # see latency_follow.py
        # the trailing-window figures the header shows now: the status bar repeats these
        # (computed apart, a moment later, the two read different p50s)
        self.shown_stats: dict[str, Any] = {"count": 0}
        self.slo_ms: float | None = None

        fg = theme.plot_foreground(self)
        self.legend = pg.LegendItem(colCount=4, verSpacing=-6)
        self._view = LatencyView(self.legend, fg)
        self._glw = self._view.glw
        self.axis = self._view.axis
        self.latency_plot, self.throughput_plot = self._view.plots
        self.titles = self._view.titles
        for plot in self._view.plots:
            plot.vb.sigRangeChangedManually.connect(self._on_manual_range)
        self._curves = LatencyCurves(
            self.latency_plot, self.throughput_plot, self.legend, theme.raw_latency_color(self)
        )
        self.lines = self._curves.lines
        self.throughput_curve = self._curves.throughput_curve
        self._curves.fill_legend(False, fg)
        self.latency_plot.vb.sigXRangeChanged.connect(self._on_x_range)
        # timing pauses (profiling passes): shaded and labelled, lines broken across them
        self.pauses = PauseBands(self.latency_plot, self.throughput_plot, fg)
        self._markers = ChangeMarkers(self.latency_plot, self.throughput_plot)
        self._slo = SloLine(self.latency_plot)
        self._follow = FollowedRange(self.latency_plot, self.throughput_plot)

        self.follow_action = QAction("Follow latest", self, checkable=True, checked=True)
        self.follow_action.setToolTip("Keep the last seconds in view (double-click the plot)")
        self.follow_action.toggled.connect(self.set_follow)
        for plot in self._view.plots:
            plot.vb.menu.addSeparator()
            plot.vb.menu.addAction(self.follow_action)
        self._glw.scene().sigMouseClicked.connect(self._on_click)

        self._header = StatsRow(self.follow_action)
        self.stats_label, self.machine = self._header.label, self._header.machine
        self._stats_at = 0.0  # monotonic time of the last stats text
        layout = QVBoxLayout()
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(self._header.layout)
        layout.addWidget(self._glw, 1)
        self.setLayout(layout)
        self._painting = False
        self._apply_theme()

        self._start_pacing(self, paint_hz, cpu_budget)

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
        self._view.set_generation(on)
        self._curves.set_generation(on, theme.plot_foreground(self))
        self._header.set_generation(on)
        self.set_slo(self.slo_ms)  # its height in the axis's units
        self._follow.reset()
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
        fg, bg = theme.plot_foreground(self), theme.plot_background(self)
        self._markers.add(t_s, label, self.window_s, fg, bg)

    def add_pause(self, t_s: float, label: str = "profiling", relabel: bool = False) -> None:
        """Timing stops here until the next samples arrive (a profiling pass, or timing
        paused): the gap is shaded and labelled, and no line is drawn across it. With
        `relabel`, a pause already open takes this label (paused during a pass)."""
        self.pauses.begin(t_s, label, relabel)
        self._dirty = True

    def set_slo(self, ms: float | None) -> None:
        """A horizontal line at the p99 target (None: none)."""
        self.slo_ms = self._slo.set(ms, self.generation.y)

    def clear(self) -> None:
        """Forget all samples, bins and markers (a new session); resume following."""
        self.series.clear()
        self.generation.series.clear()
        self._follow.reset()
        self._markers.clear()
        self._curves.clear()
        self.pauses.clear()
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
        return self._curves.drawn(name)

    def rolling_percentiles(self) -> FloatArray:
        """(3, n) trailing-window p50/p90/p99 per retained sample (as of the last paint)."""
        return self.series.rolling_percentiles()

    @property
    def markers(self) -> list[tuple[float, str]]:
        return self._markers.shown

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
                x0, x1 = self._follow.apply(
                    self.series, self.generation, self.window_s, self.stepped_follow
                )
            else:
                x0, x1 = self.latency_plot.vb.viewRange()[0]
            breaks = [p.start_s for p in self.pauses.log.pauses]
            self._curves.draw(self.series, self.generation, breaks, x0, x1, self._following)
            (left, _), (bottom, _) = self.latency_plot.vb.viewRange()
            self.pauses.update(float(t[0]), float(t[-1]), bottom, left)
            self._markers.drop_before(float(t[0]))
            # pyqtgraph moves its view transforms when a paint begins, and moving them
            # schedules a second paint of the whole view; moved now, one paint draws it.
            self._glw.scene().prepareForPaint()
            self._set_stats_text()
            self._frames += 1
        finally:
            self._painting = False

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
            self._header.show_text(self.generation.header(stats, self._samples.total))
            return
        self.shown_stats = stats
        self._header.show(stats, self._samples.total)

    # ----------------------------------------------------------------------------- export
    def export_image(self, path: str) -> None:
        """Save both plots as PNG or SVG, chosen by the file extension (ValueError otherwise)."""
        check_format(path)
        self.paint_now()
        export_layout(self._glw, path, theme.plot_background(self), "OpScope latency")

    # ----------------------------------------------------------------------------- theme
    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange and hasattr(self, "_curves"):
            self._apply_theme()
        super().changeEvent(event)

    def _apply_theme(self) -> None:
        fg, bg = theme.plot_foreground(self), theme.plot_background(self)
        self._view.apply_theme(fg, bg, theme.grid_alpha(self))
        self._curves.apply_theme(fg, theme.raw_latency_color(self))
