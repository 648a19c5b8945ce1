"""The Traffic dock: a traffic pattern, a dynamic batcher and a response cache to serve
the loaded model with ("Run load": the real serving loop in the engine host), the serving
run's own curves, and the What-if view the simulator draws as the sliders move.

Widgets, signals and setters only (app/traffic/port.py says which); app/traffic/controller.py
talks to the engine."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSlider,
    QSpinBox,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from engine.api import BatchPolicy, LoadRunRequest, with_trace_window
from widgets.serving_plot import ServingPlot
from widgets.spin_boxes import special
from widgets.trace_drop import TraceDrops
from widgets.what_if import WhatIfPlot

DEBOUNCE_MS = 300
PATTERNS = (
    ("poisson", "Poisson"),
    ("constant", "Constant"),
    ("bursts", "Bursts"),
    ("ramp", "Ramp"),
    ("trace", "Trace file"),
)
MAX_RATE = 20_000


class TrafficDock(TraceDrops, QWidget):
    """Emits `run_requested(LoadRunRequest)`, `stop_requested()`, `calibrate_requested()`,
    `cancel_calibration_requested()` and, debounced, `settings_changed()`."""

    run_requested = Signal(object)
    stop_requested = Signal()
    calibrate_requested = Signal()
    cancel_calibration_requested = Signal()
    settings_changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._debounce = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self._debounce.timeout.connect(self.settings_changed)

        self.pattern = QComboBox()
        for key, label in PATTERNS:
            self.pattern.addItem(label, key)
        self.pattern.setToolTip(
            "Open-loop arrivals: requests are sent at their scheduled times whatever the "
            "server does, and latency runs from each request's scheduled time."
        )
        self.rate = QSpinBox(minimum=1, maximum=MAX_RATE, value=200, suffix=" /s")
        self.rate_slider = QSlider(Qt.Orientation.Horizontal)
        self.rate_slider.setRange(1, 2000)
        self.rate_slider.setValue(200)
        self.rate_slider.setMinimumWidth(90)
        self.rate_slider.setToolTip("Mean request rate (Bursts: the base rate; Ramp: from)")
        self.peak = QSpinBox(minimum=1, maximum=MAX_RATE, value=1000, suffix=" /s")
        self.peak.setToolTip("Bursts: the rate during a burst. Ramp: the rate it ends at.")
        self.period = QDoubleSpinBox(minimum=0.1, maximum=600, value=5.0, suffix=" s")
        self.period.setToolTip("Bursts: one burst every this many seconds")
        self.duty = QDoubleSpinBox(minimum=0.01, maximum=0.99, value=0.2, singleStep=0.05)
        self.duty.setToolTip("Bursts: the share of each period spent bursting")
        self.trace_path = QLineEdit()
        self.trace_path.setPlaceholderText("a trace file (or drop one on this dock)")
        self.trace_path.setToolTip(
            "Arrivals replayed from a file: OpScope's CSV of times, an Azure LLM inference "
            "trace, BurstGPT, or Mooncake JSONL (detected from its first line)"
        )
        self.trace_browse = QPushButton("Browse…")
        self.trace_speed = QDoubleSpinBox(minimum=0.01, maximum=1000, value=1.0, suffix=" x")
        self.trace_speed.setToolTip("Replay this many times faster (the What-if scales it)")
        self.trace_start = QDoubleSpinBox(minimum=0, maximum=1e8, value=0, decimals=1, suffix=" s")
        self.trace_start.setToolTip("Replay from this far into the trace (Duration: how long)")
        self.duration = QDoubleSpinBox(minimum=1, maximum=3600, value=15, suffix=" s")
        self.duration.setToolTip("Seconds of traffic (the first second is the warm-up)")

        self.max_batch = QSpinBox(minimum=1, maximum=256, value=1)
        self.max_batch.setToolTip("Largest batch the dynamic batcher forms")
        self.delay = QDoubleSpinBox(minimum=0, maximum=1000, value=0, decimals=1, suffix=" ms")
        self.delay.setToolTip("Max queue delay: how long a partial batch may wait to fill")
        self.instances = QSpinBox(minimum=1, maximum=16, value=1)
        self.instances.setToolTip("Model instances serving at once")
        self.queue_limit = special(QSpinBox(minimum=0, maximum=1_000_000, value=0), "none")
        self.queue_limit.setToolTip("Requests beyond this many waiting are rejected")
        self.timeout = special(
            QDoubleSpinBox(minimum=0, maximum=600_000, value=0, decimals=0, suffix=" ms"), "none"
        )
        self.timeout.setToolTip("A request that waited longer is dropped (timed out)")
        self.cache = special(QSpinBox(minimum=0, maximum=10_000_000, value=0), "off")
        self.cache.setToolTip("Response cache entries (LRU); a hit skips the model")
        self.repeat = QDoubleSpinBox(minimum=0, maximum=0.95, value=0, singleStep=0.05)
        self.repeat.setToolTip("Share of requests repeating an earlier one (Zipf-popular)")
        self.slo = special(
            QDoubleSpinBox(minimum=0, maximum=100_000, value=0, decimals=1, suffix=" ms"), "none"
        )
        self.slo.setToolTip(
            "p99 target: a line on the latency plot and the What-if view; crossing it "
            "leaves a marker and a warning"
        )

        self.run_button = QPushButton("Run load")
        self.run_button.setToolTip("Serve the loaded model under this traffic (Ctrl+L)")
        self.stop_button = QPushButton("Stop load")
        self.stop_button.setToolTip("Stop sending; what was sent is served and kept")
        self.stop_button.setEnabled(False)
        self.calibrate_button = QPushButton("Calibrate What-if")
        self.calibrate_button.setToolTip(
            "Time batches of every size on the engine (timing pauses a few seconds; cached "
            "per model, config and machine) so the simulator can predict; once calibrated, "
            "Recalibrate What-if measures again"
        )
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip(
            "Stop the calibration between two batches; nothing half-measured is kept (an "
            "earlier calibration stays)"
        )
        self.cancel_button.hide()
        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.progress.hide()

        traffic = QFormLayout()
        traffic.addRow("Pattern", self.pattern)
        rate_row = QHBoxLayout()
        rate_row.addWidget(self.rate_slider, 1)
        rate_row.addWidget(self.rate)
        traffic.addRow("Rate", rate_row)
        # where the starting rate came from (the model's measured capacity)
        self.rate_note = QLabel("Rate: a placeholder until live timing measures the model")
        self.rate_note.setWordWrap(True)
        self.rate_note.setStyleSheet("color: palette(placeholder-text)")
        self._suggesting = False  # a rate set by suggest_rate, not by the user
        self._rate_edited = False
        traffic.addRow("", self.rate_note)
        self.peak_label, self.period_label, self.duty_label = (
            QLabel("Peak"),
            QLabel("Period"),
            QLabel("Duty"),
        )
        traffic.addRow(self.peak_label, self.peak)
        traffic.addRow(self.period_label, self.period)
        traffic.addRow(self.duty_label, self.duty)
        trace_row = QHBoxLayout()
        trace_row.addWidget(self.trace_path, 1)
        trace_row.addWidget(self.trace_browse)
        self.trace_label, self.speed_label, self.start_label = (
            QLabel("Trace"),
            QLabel("Speed"),
            QLabel("From"),
        )
        traffic.addRow(self.trace_label, trace_row)
        traffic.addRow(self.speed_label, self.trace_speed)
        traffic.addRow(self.start_label, self.trace_start)
        self.rate_label = traffic.labelForField(rate_row)
        self._rate_row = rate_row
        traffic.addRow("Duration", self.duration)
        batching = QFormLayout()
        batching.addRow("Max batch", self.max_batch)
        batching.addRow("Queue delay", self.delay)
        batching.addRow("Instances", self.instances)
        batching.addRow("Queue limit", self.queue_limit)
        batching.addRow("Timeout", self.timeout)
        cache = QFormLayout()
        cache.addRow("Cache size", self.cache)
        cache.addRow("Repeat ratio", self.repeat)
        cache.addRow("SLO p99", self.slo)
        self.stretches = QCheckBox("slow stretches")
        self.stretches.setToolTip(
            "What if: draw service times from the calibrated slow-stretch process (slow "
            "batches come in runs, as this machine's did) rather than one by one"
        )
        cache.addRow("", self.stretches)
        controls = QWidget()  # the knobs, stacked, left; the curves right
        column = QVBoxLayout(controls)
        column.setContentsMargins(0, 0, 4, 0)
        for title, form in (("Traffic", traffic), ("Batching", batching), ("Cache, SLO", cache)):
            box = QGroupBox(title)
            box.setLayout(form)
            column.addWidget(box)
        column.addStretch(1)
        scroll = QScrollArea()  # a short window scrolls the knobs instead of growing
        scroll.setWidget(controls)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setMinimumWidth(220)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.calibrate_button)
        buttons.addWidget(self.cancel_button)
        buttons.addStretch(1)

        self.serving_plot = ServingPlot()
        self.what_if = WhatIfPlot()
        self.views = QTabWidget()
        self.views.addTab(self.serving_plot, "Serving")
        self.views.addTab(self.what_if, "What if")
        right = QWidget()
        right_column = QVBoxLayout()
        right_column.setContentsMargins(4, 0, 0, 0)
        right_column.addLayout(buttons)
        right_column.addWidget(self.progress)
        right_column.addWidget(self.views, 1)
        right.setLayout(right_column)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(scroll)
        split.addWidget(right)
        split.setStretchFactor(1, 1)
        split.setChildrenCollapsible(False)
        split.setSizes([280, 520])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(split, 1)

        self.rate_slider.valueChanged.connect(self._slider_moved)
        self.rate.valueChanged.connect(self._rate_typed)
        self.pattern.currentIndexChanged.connect(self._pattern_changed)
        for w in (
            self.peak,
            self.period,
            self.duty,
            self.max_batch,
            self.delay,
            self.instances,
            self.queue_limit,
            self.timeout,
            self.cache,
            self.repeat,
            self.slo,
            self.duration,
            self.trace_speed,
            self.trace_start,
        ):
            w.valueChanged.connect(self._changed)
        self.trace_path.textChanged.connect(self._changed)
        self.stretches.toggled.connect(self._changed)
        self.trace_browse.clicked.connect(self._browse_trace)
        self.setAcceptDrops(True)
        self.run_button.clicked.connect(self.run)
        self.stop_button.clicked.connect(self.stop_requested)
        self.calibrate_button.clicked.connect(self.calibrate_requested)
        self.cancel_button.clicked.connect(self.cancel_calibration_requested)
        QShortcut(QKeySequence("Ctrl+L"), self, self.run, context=Qt.ShortcutContext.WindowShortcut)
        self._pattern_changed()

    # -- values -------------------------------------------------------------------------
    def traffic_spec(self) -> str:
        kind, rate = self.pattern.currentData(), self.rate.value()
        if kind == "bursts":
            return (
                f"bursts:{rate},{self.peak.value()},{self.period.value():g},{self.duty.value():g}"
            )
        if kind == "ramp":
            return f"ramp:{rate},{self.peak.value()}"
        if kind == "trace":
            text = f"trace:{self.trace_path.text().strip()}"
            speed, start = self.trace_speed.value(), self.trace_start.value()
            if not self.trace_path.text().strip() or (speed == 1 and start == 0):
                return text
            return with_trace_window(text, speed, start)
        return f"{kind}:{rate}"

    def policy(self) -> BatchPolicy:
        return BatchPolicy(
            max_batch=self.max_batch.value(),
            delay_ms=self.delay.value(),
            queue_limit=self.queue_limit.value(),
            timeout_ms=self.timeout.value(),
            instances=self.instances.value(),
        )

    def slo_ms(self) -> float | None:
        return self.slo.value() or None

    def command(self) -> LoadRunRequest:
        return LoadRunRequest(
            self.traffic_spec(),
            self.policy().to_json(),
            duration_s=self.duration.value(),
            cache=self.cache.value(),
            repeat=self.repeat.value(),
            slo_ms=self.slo_ms(),
        )

    def calibrate_sizes(self) -> tuple[int, int]:
        """The max batch and the instances a calibration times."""
        return self.max_batch.value(), self.instances.value()

    def cache_settings(self) -> tuple[int, float]:
        """The response cache's size and the share of requests repeating an earlier one."""
        return self.cache.value(), self.repeat.value()

    def slow_stretches(self) -> bool:
        return self.stretches.isChecked()

    def alive(self) -> bool:
        """The What-if's widgets still exist (an answer can come after the window closed)."""
        import shiboken6

        return bool(shiboken6.isValid(self.what_if))

    # -- state --------------------------------------------------------------------------
    def set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running)
        self.stop_button.setEnabled(running)
        self.calibrate_button.setEnabled(not running)
        self.progress.setVisible(running)
        if running:
            self.progress.setRange(0, 0)

    def set_calibrating(self, calibrating: bool) -> None:
        """While a calibration runs: its progress and Cancel; Run load and Calibrate wait."""
        self.run_button.setEnabled(not calibrating)
        self.calibrate_button.setEnabled(not calibrating)
        self.cancel_button.setVisible(calibrating)
        self.cancel_button.setEnabled(calibrating)
        self.progress.setVisible(calibrating)
        if calibrating:
            self.progress.setRange(0, 0)

    def show_progress(self, done: float, total: float | None, message: str) -> None:
        """`done` of `total` (None: not known yet, a busy bar), and what is happening."""
        if total:
            self.progress.setRange(0, max(int(total * 10), 1))  # tenths: seconds move it
            self.progress.setValue(min(int(done * 10), int(total * 10)))
        self.progress.setFormat(message)

    def set_calibrate_enabled(self, enabled: bool) -> None:
        self.calibrate_button.setEnabled(enabled)

    def set_calibrated(self, calibrated: bool) -> None:
        """Once calibrated, the button measures again."""
        self.calibrate_button.setText("Recalibrate What-if" if calibrated else "Calibrate What-if")

    def set_cancel_enabled(self, enabled: bool) -> None:
        self.cancel_button.setEnabled(enabled)

    # -- the serving run -----------------------------------------------------------------
    def show_serving(self) -> None:
        self.views.setCurrentWidget(self.serving_plot)

    def clear_serving(self) -> None:
        self.serving_plot.clear()

    def append_serving(self, t_s: float, queued: int, peak: int, mean_batch: float) -> None:
        self.serving_plot.append(t_s, queued, peak, mean_batch)

    def set_tally(self, text: str) -> None:
        self.serving_plot.set_tally(text)

    # -- the What-if view ----------------------------------------------------------------
    def show_what_if(self) -> None:
        self.views.setCurrentWidget(self.what_if)

    def set_what_if_text(self, text: str) -> None:
        self.what_if.set_text(text)

    def set_what_if_slo(self, ms: float | None) -> None:
        self.what_if.set_slo(ms)

    def set_what_if_rate(self, rate: float) -> None:
        self.what_if.set_rate(rate)

    def set_what_if_curves(
        self, current: list[dict[str, Any]] | None, proposed: list[dict[str, Any]] | None
    ) -> None:
        self.what_if.set_curves(current, proposed)

    def set_what_if_flags(self, sentences: list[str]) -> None:
        self.what_if.set_flags(sentences)

    def set_what_if_real(self, offered: float | None, p99_ms: float | None, text: str = "") -> None:
        self.what_if.set_real(offered, p99_ms, text)

    # -- internals ----------------------------------------------------------------------
    def run(self) -> None:
        """Run load with the dock's settings (its button, Ctrl+L, Run > Run Load): nothing
        while a load run or a calibration goes on."""
        if self.run_button.isEnabled():
            self.run_requested.emit(self.command())

    def _slider_moved(self, value: int) -> None:
        if self.rate.value() != value:
            self.rate.setValue(value)

    def suggest_rate(self, rate: int, why: str) -> None:
        """The starting rate, from the model's measured capacity, and where it came from
        (the user's own rate, once typed or slid, is left alone: see rate_edited)."""
        self._suggesting = True
        try:
            self.rate.setValue(min(max(rate, 1), MAX_RATE))
        finally:
            self._suggesting = False
        self.rate_note.setText(f"Rate: {why}")
        self.rate_note.setToolTip("The starting rate; type or slide your own")
        self.rate_note.show()

    def rate_edited(self) -> bool:
        """Whether the user set the rate (typed or slid) since the dock opened."""
        return self._rate_edited

    def _rate_typed(self, value: int) -> None:
        if not self._suggesting:
            self._rate_edited = True
            self.rate_note.hide()  # the user's own rate: no longer the suggested one
        if self.rate_slider.value() != value and value <= self.rate_slider.maximum():
            self.rate_slider.blockSignals(True)
            self.rate_slider.setValue(value)
            self.rate_slider.blockSignals(False)
        self._changed()

    def _pattern_changed(self) -> None:
        kind = self.pattern.currentData()
        bursts, ramp = kind == "bursts", kind == "ramp"
        for w in (self.peak, self.peak_label):
            w.setVisible(bursts or ramp)
        self.peak_label.setText("To rate" if ramp else "Peak")
        for part in (self.period, self.period_label, self.duty, self.duty_label):
            part.setVisible(bursts)
        trace = kind == "trace"
        trace_parts: tuple[QWidget, ...] = (
            self.trace_label,
            self.trace_path,
            self.trace_browse,
            self.speed_label,
            self.trace_speed,
            self.start_label,
            self.trace_start,
        )
        for widget in trace_parts:
            widget.setVisible(trace)
        for rate_part in (self.rate_label, self.rate, self.rate_slider):
            if rate_part is not None:
                rate_part.setVisible(not trace)
        self._changed()

    # -- a trace file ----------------------------------------------------------------------
    def set_trace(self, path: str) -> None:
        """Replay `path`: the Trace file pattern, its path filled in."""
        self.trace_path.setText(path)
        self.pattern.setCurrentIndex(self.pattern.findData("trace"))

    def _browse_trace(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Replay a Trace", "", "Traces (*.csv *.jsonl *.json *.txt);;All files (*)"
        )
        if path:
            self.set_trace(path)

    def _changed(self, *_: object) -> None:
        self._debounce.start()
