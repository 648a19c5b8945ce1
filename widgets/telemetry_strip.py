"""Small live sparklines of named machine series (CPU %, RSS, clocks; GPU ones later).

A series appears the first time its name arrives; each keeps a bounded ring buffer and
shows its latest value as text. A 5 Hz timer paints only the series that changed.
Each sparkline is a small QPainter widget (`widgets/sparkline.py`), not a pyqtgraph plot.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSize, Qt, QTimer
from PySide6.QtGui import QResizeEvent, QShowEvent
from PySide6.QtWidgets import QFrame, QGridLayout, QLabel, QLayout, QVBoxLayout, QWidget

from widgets import theme
from widgets.models.ring_buffer import FloatArray, RingBuffer
from widgets.sparkline import Sparkline

# name -> (title, unit); anything else is titled from its words and unit from its suffix
KNOWN: dict[str, tuple[str, str]] = {
    "cpu_percent": ("CPU", "%"),
    "rss_mb": ("RSS", " MB"),
    "cpu_freq_mhz": ("CPU clock", " MHz"),
}
SUFFIXES: tuple[tuple[str, str], ...] = (
    ("_percent", "%"),
    ("_pct", "%"),
    ("_mb", " MB"),
    ("_gb", " GB"),
    ("_mhz", " MHz"),
    ("_gbps", " GB/s"),
    ("_w", " W"),
    ("_c", " °C"),
)
ACRONYMS = {"cpu", "gpu", "rss", "sm", "dram", "mem", "io", "pcie"}


def describe(name: str) -> tuple[str, str]:
    """(title, unit) for a series name: "gpu_power_w" -> ("GPU power", " W")."""
    if name in KNOWN:
        return KNOWN[name]
    unit, stem = "", name
    for suffix, suffix_unit in SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            unit, stem = suffix_unit, name[: -len(suffix)]
            break
    words = [w.upper() if w in ACRONYMS and w != "mem" else w for w in stem.split("_") if w]
    return " ".join(words) or name, unit


def format_value(value: float, unit: str) -> str:
    if not math.isfinite(value):
        return "–"
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return f"{text}{unit}"


@dataclass
class _Series:
    title: str
    unit: str
    buffer: RingBuffer
    cell: QFrame
    label: QLabel
    spark: Sparkline
    dirty: bool = False


class TelemetryStrip(QWidget):
    """Feed with `append(t_s, {name: value})`; one compact cell per series, in arrival order."""

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        capacity: int = 3600,
        window_s: float = 60.0,
        columns: int = 6,
        paint_hz: float = 5.0,
    ) -> None:
        super().__init__(parent)
        self.capacity = capacity
        self.window_s = float(window_s)
        self._columns = max(1, columns)
        self._per_row = 0  # cells per row now (reflowed to the width)
        self._series: dict[str, _Series] = {}
        self._x_link: pg.PlotItem | None = None
        self._link_active: Callable[[], bool] = lambda: True
        self._own_range = True  # following our own last window_s (no link, or it is idle)
        self._linked_range: tuple[float, float] | None = None
        self._range_dirty = False
        self._formats: dict[str, tuple[str, str]] = {}
        self._last_t = 0.0
        self._grid = QGridLayout(self)
        self._grid.setContentsMargins(0, 0, 0, 0)
        self._grid.setSpacing(4)
        # the cells wrap to the width (_reflow): the grid must not hold the window wide
        self._grid.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        self._timer = QTimer(self)
        self._timer.setInterval(max(1, round(1000 / paint_hz)))
        self._timer.timeout.connect(self._on_timer)
        self._timer.start()

    # ------------------------------------------------------------------------------- API
    def append(self, t_s: float, values: dict[str, float]) -> None:
        """One telemetry sample; non-finite values are skipped, new names get a cell."""
        self._last_t = max(self._last_t, float(t_s))
        for name, value in values.items():
            if value is None or not math.isfinite(float(value)):
                continue
            series = self._series.get(name) or self._add_series(name)
            series.buffer.append([t_s, float(value)])
            series.dirty = True

    def set_format(self, name: str, title: str, unit: str) -> None:
        """Override the title and unit shown for a series (before or after it arrives)."""
        self._formats[name] = (title, unit)
        series = self._series.get(name)
        if series is not None:
            series.title, series.unit = title, unit
            theme.make_steady(series.label, f"{title} 88,888{unit}")
            series.dirty = True

    def set_x_link(
        self, plot_item: pg.PlotItem | None, active: Callable[[], bool] | None = None
    ) -> None:
        """Show the same x range as another plot (e.g. the latency plot's); None to follow
        the last `window_s` on our own, as also while `active()` is False (the linked plot
        has nothing to show yet, after a bad first model say). Both must use the same
        clock: seconds since the session started. (pyqtgraph's setXLink would map by screen
        position, so cells side by side would each show a different time span.)"""
        if self._x_link is not None:
            self._x_link.sigXRangeChanged.disconnect(self._on_linked_range)
        self._x_link = plot_item
        self._link_active = active or (lambda: True)
        if plot_item is not None:
            plot_item.sigXRangeChanged.connect(self._on_linked_range)
            self._on_linked_range()
        for series in self._series.values():
            series.dirty = True

    def _on_linked_range(self, *_: object) -> None:
        """Remember the linked range; the paint timer applies it (5 Hz, not per change:
        the followed latency plot moves ten times a second and each move would repaint
        every sparkline)."""
        if self._x_link is None:
            return
        self._linked_range = tuple(self._x_link.vb.viewRange()[0])
        self._range_dirty = True

    def _apply_linked_range(self) -> None:
        if not self._range_dirty or self._linked_range is None:
            return
        self._range_dirty = False
        x0, x1 = self._linked_range
        for series in self._series.values():
            series.spark.set_x_range(x0, x1)

    @property
    def names(self) -> list[str]:
        return list(self._series)

    def data(self, name: str) -> tuple[FloatArray, FloatArray]:
        """(t_s, values) retained for one series: views valid until the next append."""
        buffer = self._series[name].buffer
        return buffer.view(0), buffer.view(1)

    def label_text(self, name: str) -> str:
        return self._series[name].label.text()

    def sparkline(self, name: str) -> Sparkline:
        return self._series[name].spark

    def clear(self) -> None:
        """Drop every sample; the cells stay (the same metrics come back next session)."""
        self._last_t = 0.0
        for series in self._series.values():
            series.buffer.clear()
            series.spark.set_data(np.zeros(0), np.zeros(0))
            series.label.setText(f"{series.title} –")
            series.dirty = False

    # ----------------------------------------------------------------------------- paint
    def _on_timer(self) -> None:
        if self.isVisible():  # hidden: catch up when shown
            self.paint_now()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.paint_now()

    def paint_now(self) -> None:
        own = self._x_link is None or not self._link_active()
        if own != self._own_range:
            self._own_range, self._range_dirty = own, True
            for series in self._series.values():
                series.dirty = True
        if not own:
            self._apply_linked_range()
        for series in self._series.values():
            if series.dirty:
                self._paint_series(series)

    def _paint_series(self, series: _Series) -> None:
        series.dirty = False
        t, v = series.buffer.view(0), series.buffer.view(1)
        series.spark.set_data(t, v)
        latest = float(v[-1]) if v.size else math.nan
        theme.set_text_if_changed(
            series.label, f"{series.title} {format_value(latest, series.unit)}"
        )
        series.label.setToolTip(
            f"{series.title}: {format_value(latest, series.unit)}\n"
            f"min {format_value(float(v.min()), series.unit)} · "
            f"max {format_value(float(v.max()), series.unit)} over {v.size} samples"
            if v.size
            else series.title
        )
        if self._own_range and t.size:
            series.spark.set_x_range(self._last_t - self.window_s, self._last_t)

    def _add_series(self, name: str) -> _Series:
        title, unit = self._formats.get(name) or describe(name)
        cell = QFrame()
        cell.setFrameShape(QFrame.Shape.StyledPanel)
        label = QLabel(f"{title} –")
        label.setStyleSheet("font-weight: 600;")
        label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        theme.make_steady(label, f"{title} 88,888{unit}")
        spark = Sparkline(color=theme.SPARK)
        spark.setFixedHeight(34)
        spark.setMinimumWidth(100)
        if self._x_link is not None:
            spark.set_x_range(*self._x_link.vb.viewRange()[0])
        box = QVBoxLayout(cell)
        box.setContentsMargins(6, 3, 6, 3)
        box.setSpacing(1)
        box.addWidget(label)
        box.addWidget(spark)
        cell.setMinimumWidth(label.width() + 14)  # the number is never clipped
        series = _Series(title, unit, RingBuffer(self.capacity, 2), cell, label, spark)
        self._series[name] = series
        self._reflow()
        return series

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._reflow()

    def minimumSizeHint(self) -> QSize:
        """As narrow as the widest cell (cells wrap into rows), so a 1024 px window fits."""
        hint = super().minimumSizeHint()
        widest = max((s.cell.minimumWidth() for s in self._series.values()), default=0)
        return QSize(widest, hint.height())

    def _reflow(self) -> None:
        """As many cells per row as fit the width (at most `columns`), the rest below."""
        cells = [s.cell for s in self._series.values()]
        if not cells:
            return
        cell_w = max(c.minimumWidth() for c in cells) + self._grid.spacing()
        per_row = max(1, min(self._columns, len(cells), (self.width() + 4) // max(1, cell_w)))
        if per_row == self._per_row and all(self._grid.indexOf(c) >= 0 for c in cells):
            return
        self._per_row = per_row
        for cell in cells:
            self._grid.removeWidget(cell)
        for col in range(self._grid.columnCount()):
            self._grid.setColumnStretch(col, 0)
        for index, cell in enumerate(cells):
            self._grid.addWidget(cell, index // per_row, index % per_row)
        for col in range(per_row):
            self._grid.setColumnStretch(col, 1)
