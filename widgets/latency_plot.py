"""Live latency curve: per-inference samples, rolling p50/p90/p99, throughput, config markers.

Throughput lives in a short plot below, x-linked to the latency plot, not on a right-hand
axis: two unit scales in one frame invite misreading, and an overlaid ViewBox needs manual
geometry syncing, while a linked plot pans, zooms and exports with the other for free.
Per-inference latency is a width-1 line with peak downsampling (min and max per pixel
column): every spike stays visible and it stays fast at 300k points where a scatter would not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QColor, QShowEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

from widgets import theme
from widgets.plot_export import check_format, export_layout
from widgets.ring_buffer import FloatArray, RingBuffer

T, LAT, P50, P90, P99 = range(5)
QUANTILES = (50.0, 90.0, 99.0)
BIN_S = 0.5  # throughput bin width
_CHUNK_ELEMENTS = 2_000_000  # bound on the temporary window copy np.percentile makes
_MAX_WINDOWS = 20_000  # rolling-percentile windows computed per paint, at most
_LABEL_LEVELS = (0.97, 0.86, 0.75)  # marker label heights, staggered when markers crowd


@dataclass
class _Marker:
    t_s: float
    label: str
    lines: tuple[pg.InfiniteLine, pg.InfiniteLine]


class LatencyPlot(QWidget):
    """Feed with `append`; a timer paints at `paint_hz` only when new data arrived."""

    follow_changed = Signal(bool)

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        capacity: int = 300_000,
        percentile_window: int = 200,
        window_s: float = 60.0,
        paint_hz: float = 10.0,
        throughput_capacity: int = 20_000,
    ) -> None:
        super().__init__(parent)
        if percentile_window < 1:
            raise ValueError(f"percentile_window must be >= 1, got {percentile_window}")
        self.window_s = float(window_s)
        self.percentile_window = min(percentile_window, capacity)
        self._samples = RingBuffer(capacity, 5)  # t, latency, p50, p90, p99
        self._bins = RingBuffer(throughput_capacity, 2)  # bin centre, samples/s
        self._open_bin: int | None = None  # index of the bin still filling
        self._open_sum = 0.0  # samples (batch x inferences) in it so far
        self._pct_total = 0  # samples (ever appended) whose percentiles are computed
        self._dirty = False
        self._following = True
        self._markers: list[_Marker] = []
        self._marker_level = 0

        self._glw = pg.GraphicsLayoutWidget()
        # The legend gets a row of its own above the plot: inside it would hide marker labels.
        self.legend = pg.LegendItem(colCount=4, verSpacing=-6)
        self._glw.ci.addItem(self.legend, row=0, col=0)
        self._glw.ci.layout.setAlignment(self.legend, Qt.AlignmentFlag.AlignRight)
        self.latency_plot: pg.PlotItem = self._glw.addPlot(row=1, col=0)
        self.throughput_plot: pg.PlotItem = self._glw.addPlot(row=2, col=0)
        self._glw.ci.setContentsMargins(4, 0, 10, 4)
        self._glw.ci.layout.setVerticalSpacing(0)
        self._glw.ci.layout.setRowStretchFactor(1, 3)
        self._glw.ci.layout.setRowStretchFactor(2, 1)
        self.throughput_plot.setXLink(self.latency_plot)
        self.latency_plot.setLabel("left", "latency (ms)")
        self.latency_plot.getAxis("bottom").setStyle(showValues=False)
        self.throughput_plot.setLabel("left", "samples/s")
        self.throughput_plot.setLabel("bottom", "time (s)")
        for plot in (self.latency_plot, self.throughput_plot):
            plot.getAxis("left").setWidth(62)
            plot.setClipToView(True)
            plot.setDownsampling(auto=True, mode="peak")
            plot.vb.disableAutoRange()  # ranges are set here: bounds over 300k points are slow
            plot.vb.sigRangeChangedManually.connect(self._on_manual_range)

        # Peak downsampling keeps min and max per bucket, so one bucket per pixel column
        # (factor 1) is the exact envelope; pyqtgraph's default 5 draws 5x the vertices.
        line = {"skipFiniteCheck": True, "autoDownsampleFactor": 1.0}
        self.curves: dict[str, pg.PlotDataItem] = {
            "latency": self.latency_plot.plot(name="per inference", **line),
            "p50": self.latency_plot.plot(name="p50", pen=pg.mkPen(theme.P50, width=1), **line),
            "p90": self.latency_plot.plot(name="p90", pen=pg.mkPen(theme.P90, width=1), **line),
            "p99": self.latency_plot.plot(name="p99", pen=pg.mkPen(theme.P99, width=1), **line),
            "throughput": self.throughput_plot.plot(
                pen=pg.mkPen(theme.THROUGHPUT, width=1), **line
            ),
        }
        for key in ("latency", "p50", "p90", "p99"):
            self.legend.addItem(self.curves[key], self.curves[key].name())
        hint = self.legend.layout.effectiveSizeHint(Qt.SizeHint.PreferredSize)
        self.legend.setFixedWidth(hint.width())
        self.legend.setFixedHeight(hint.height())

        self.follow_action = QAction("Follow latest", self, checkable=True, checked=True)
        self.follow_action.setToolTip("Keep the last seconds in view (double-click the plot)")
        self.follow_action.toggled.connect(self.set_follow)
        for plot in (self.latency_plot, self.throughput_plot):
            plot.vb.menu.addSeparator()
            plot.vb.menu.addAction(self.follow_action)
        self._glw.scene().sigMouseClicked.connect(self._on_click)

        self.stats_label = QLabel("no samples yet")
        follow_button = QToolButton()
        follow_button.setDefaultAction(self.follow_action)
        follow_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        header = QHBoxLayout()
        header.setContentsMargins(6, 2, 6, 0)
        header.addWidget(self.stats_label, 1)
        header.addWidget(follow_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addLayout(header)
        layout.addWidget(self._glw, 1)
        self._apply_theme()

        self._timer = QTimer(self)
        self._timer.setInterval(max(1, round(1000 / paint_hz)))
        self._timer.timeout.connect(self._on_timer)
        self._timer.start()

    # ----------------------------------------------------------------------------- data in
    def append(self, t_s: npt.ArrayLike, latency_ms: npt.ArrayLike, batch: int) -> None:
        """Per-inference points: seconds since the session started (non-decreasing) and ms."""
        t = np.asarray(t_s, dtype=np.float64).ravel()
        lat = np.asarray(latency_ms, dtype=np.float64).ravel()
        if t.shape != lat.shape:
            raise ValueError(f"t_s and latency_ms differ in length: {t.size} vs {lat.size}")
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        finite = np.isfinite(t) & np.isfinite(lat)
        if not finite.all():
            t, lat = t[finite], lat[finite]
        if t.size == 0:
            return
        last = self._samples.view(T)[-1] if len(self._samples) else -np.inf
        if t[0] < last or np.any(np.diff(t) < 0):
            raise ValueError("t_s must not decrease; call clear() before a new session")
        nan = np.nan
        self._samples.append([t, lat, nan, nan, nan])
        self._add_to_bins(t, batch)
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
            pos=t_s, angle=90, movable=False, pen=pen, label=label,
            labelOpts={"position": _LABEL_LEVELS[level], "color": fg, "fill": bg,
                       "border": pg.mkPen(theme.MARKER), "anchors": [(0, 0), (1, 0)]},
        )
        bottom = pg.InfiniteLine(pos=t_s, angle=90, movable=False, pen=pen)
        self.latency_plot.addItem(top, ignoreBounds=True)
        self.throughput_plot.addItem(bottom, ignoreBounds=True)
        self._markers.append(_Marker(float(t_s), label, (top, bottom)))

    def clear(self) -> None:
        """Forget all samples, bins and markers (a new session); resume following."""
        self._samples.clear()
        self._bins.clear()
        self._open_bin, self._open_sum, self._pct_total = None, 0.0, 0
        self._marker_level = 0
        for marker in self._markers:
            self._remove_marker_items(marker)
        self._markers.clear()
        for curve in self.curves.values():
            curve.setData([], [])
        self.stats_label.setText("no samples yet")
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
        return self._samples.view(T), self._samples.view(LAT)

    def throughput(self) -> tuple[FloatArray, FloatArray]:
        """(bin centre s, samples/s) of the completed 0.5 s bins."""
        return self._bins.view(0), self._bins.view(1)

    def rolling_percentiles(self) -> FloatArray:
        """(3, n) trailing-window p50/p90/p99 per retained sample (as of the last paint)."""
        return np.vstack([self._samples.view(c) for c in (P50, P90, P99)])

    @property
    def markers(self) -> list[tuple[float, str]]:
        return [(m.t_s, m.label) for m in self._markers]

    def latest_stats(self) -> dict[str, Any]:
        """count and p50/p90/p99 (ms) of the trailing window; NaN values when empty."""
        lat = self._samples.view(LAT)[-self.percentile_window :]
        if lat.size == 0:
            return {"count": 0, "p50": np.nan, "p90": np.nan, "p99": np.nan}
        p50, p90, p99 = np.percentile(lat, QUANTILES)
        return {"count": int(lat.size), "p50": float(p50), "p90": float(p90), "p99": float(p99)}

    # ----------------------------------------------------------------------------- follow
    @property
    def following(self) -> bool:
        return self._following

    def set_follow(self, on: bool) -> None:
        """Follow the last `window_s` seconds, or leave the range to the user."""
        if on == self._following:
            return
        self._following = on
        self.follow_action.setChecked(on)
        self._dirty = True  # following hands over a window, not following everything
        self.paint_now()
        self.follow_changed.emit(on)

    def _on_manual_range(self, *_: object) -> None:
        self.set_follow(False)

    def _on_click(self, event: Any) -> None:
        if event.double():
            self.set_follow(True)

    # ----------------------------------------------------------------------------- paint
    def _on_timer(self) -> None:
        if self.isVisible():  # a hidden plot (another tab) catches up when shown
            self.paint_now()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.paint_now()

    def paint_now(self) -> None:
        """Hand the new data to the plot items (the timer calls this; tests and exports may)."""
        if not self._dirty:
            return
        self._dirty = False
        self._update_percentiles()
        t = self._samples.view(T)
        if t.size == 0:
            return
        first = 0
        if self._following:
            # Hand over only the followed window (plus a margin): clipping and bounds then
            # cost O(visible), not O(capacity). Stopping to follow repaints with everything.
            x0 = self._apply_follow()
            first = int(np.searchsorted(t, x0 - 0.25 * self.window_s))
        tv = t[first:]
        for name, col in (("latency", LAT), ("p50", P50), ("p90", P90), ("p99", P99)):
            self.curves[name].setData(tv, self._samples.view(col)[first:])
        bt = self._bins.view(0)
        j = int(np.searchsorted(bt, float(tv[0]))) if self._following else 0
        self.curves["throughput"].setData(bt[j:], self._bins.view(1)[j:])
        while self._markers and self._markers[0].t_s < t[0]:
            self._remove_marker_items(self._markers.pop(0))
        stats = self.latest_stats()
        self.stats_label.setText(
            " · ".join(f"<b style='color:{color}'>{q}</b> {stats[q]:.3g} ms"
                       for q, color in (("p50", theme.P50), ("p90", theme.P90),
                                        ("p99", theme.P99)))
            + f"&nbsp;&nbsp; last {stats['count']:,} of {self._samples.total:,} inferences"
        )

    def _update_percentiles(self) -> None:
        """Rolling percentiles for the samples that arrived since the last paint only."""
        n, w = len(self._samples), self.percentile_window
        first_global = self._samples.total - n
        a = max(self._pct_total, first_global) - first_global
        self._pct_total = self._samples.total
        if a >= n:
            return
        lat = self._samples.view(LAT)
        out = np.empty((3, n - a))
        i = a
        while i < min(n, w - 1):  # the first samples of a session: expanding windows
            out[:, i - a] = np.percentile(lat[: i + 1], QUANTILES)
            i += 1
        if i < n:
            # Window r of `windows` ends at sample i + r. A burst of more than
            # _MAX_WINDOWS samples (a restored session) computes every stride-th window,
            # the newest always, and each sample takes the next computed value.
            windows = np.lib.stride_tricks.sliding_window_view(lat[i - w + 1 : n], w)
            stride = -(-(n - i) // _MAX_WINDOWS)
            first = (n - i - 1) % stride
            ends = np.arange(i + first, n, stride)
            values = np.empty((3, ends.size))
            chunk = max(1, _CHUNK_ELEMENTS // w)
            for lo in range(0, ends.size, chunk):
                hi = min(ends.size, lo + chunk)
                rows = windows[first + lo * stride : first + (hi - 1) * stride + 1 : stride]
                values[:, lo:hi] = np.percentile(rows, QUANTILES, axis=1)
            if stride == 1:
                out[:, i - a :] = values
            else:
                out[:, i - a :] = values[:, np.searchsorted(ends, np.arange(i, n))]
        for row, col in enumerate((P50, P90, P99)):
            self._samples.write(col, a, out[row])

    def _add_to_bins(self, t: FloatArray, batch: int) -> None:
        """Count samples into 0.5 s bins; a bin is published once a later sample closes it."""
        ids = np.floor(t / BIN_S).astype(np.int64)
        if self._open_bin is None:
            self._open_bin, self._open_sum = int(ids[0]), 0.0
        rel = ids - self._open_bin
        last = int(rel[-1])
        if last > self._bins.capacity:  # a long pause: older bins would drop at once anyway
            shift = last - self._bins.capacity
            self._open_bin += shift
            self._open_sum = 0.0
            rel = rel[rel >= shift] - shift
            last -= shift
        counts = np.bincount(rel, minlength=last + 1).astype(np.float64) * batch
        counts[0] += self._open_sum
        if last > 0:
            centres = (self._open_bin + np.arange(last) + 0.5) * BIN_S
            self._bins.append([centres, counts[:last] / BIN_S])
        self._open_bin += last
        self._open_sum = float(counts[last])

    def _apply_follow(self) -> float:
        """Show the last `window_s` seconds, y from 0 to the visible maximum; returns x0."""
        t, lat = self._samples.view(T), self._samples.view(LAT)
        if t.size == 0:
            return 0.0
        x1 = float(t[-1])
        x0 = min(max(float(t[0]), x1 - self.window_s), x1 - 1.0)
        i0 = int(np.searchsorted(t, x0))
        y1 = float(lat[i0:].max()) * 1.08 if i0 < t.size else 1.0
        self.latency_plot.vb.setRange(
            xRange=(x0, x1 + 0.01 * (x1 - x0)), yRange=(0.0, max(y1, 1e-3)), padding=0
        )
        bt, bv = self._bins.view(0), self._bins.view(1)
        j0 = int(np.searchsorted(bt, x0))
        top = float(bv[j0:].max()) * 1.15 if j0 < bt.size else 1.0
        self.throughput_plot.vb.setYRange(0.0, max(top, 1.0), padding=0)
        return x0

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
        for _, label in self.legend.items:
            label.setText(label.text)  # setLabelTextColor alone does not re-render the text
        self.curves["latency"].setPen(pg.mkPen(theme.raw_latency_color(self), width=1))
