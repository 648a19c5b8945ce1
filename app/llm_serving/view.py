"""The LLM Serving room's view: traffic, request lengths, layout settings and SLOs for a
generating model; "Simulate all layouts" (colocated, chunked prefill, disaggregated side
by side) and "Run for real" (one layout, the real serving loop), a table of both and a
bar chart of their p99s against the SLOs.

Widgets, signals and setters only (app/llm_serving/port.py); app/llm_serving/controller.py
runs the work."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QResizeEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from widgets import theme
from widgets.llm_serving_plot import LLMServingPlot
from widgets.models.llm_serving_arrangement import FORM_MIN_HEIGHT, arrange
from widgets.models.llm_serving_form import ServingForm
from widgets.models.llm_serving_table import HEADERS, LLMServingTable
from widgets.reflow_grid import ReflowGrid, pairs
from widgets.spin_boxes import special
from widgets.trace_drop import TraceDrops

LAYOUT_CHOICES = (
    ("colocated", "Colocated"),
    ("chunked", "Chunked prefill"),
    ("disaggregated", "Disaggregated"),
)


class LLMServingPanel(TraceDrops, QWidget):
    """Emits `simulate_requested()`, `remeasure_requested()` (Measure again: a new
    calibration, then the simulation), `real_requested()`, `cancel_requested()`,
    `settings_changed()` when any value a simulation reads changes, and `live_toggled(bool)`
    (Live: simulate again as the settings change)."""

    simulate_requested = Signal()
    remeasure_requested = Signal()
    settings_changed = Signal()
    real_requested = Signal()
    cancel_requested = Signal()
    live_toggled = Signal(bool)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        d = ServingForm()
        self.traffic_kind = QComboBox()
        self.traffic_kind.addItem("Poisson", "poisson")
        self.traffic_kind.addItem("Spec", "spec")
        self.traffic_kind.setToolTip(
            "Open-loop arrivals, seeded: Poisson at a rate, or any "
            "spec (bursts:BASE,PEAK,PERIOD_S,DUTY, ramp:FROM,TO, trace:FILE, or drop a trace "
            "file on this dock)"
        )
        self.rate = QDoubleSpinBox(
            minimum=0, maximum=10_000, value=d.rate, decimals=2, suffix=" /s"
        )
        self.spec = QLineEdit(d.spec)
        self.spec.setToolTip(
            "bursts:BASE,PEAK,PERIOD_S,DUTY: Poisson at BASE/s, PEAK/s for "
            "the first DUTY share of every PERIOD_S seconds"
        )
        self.seed = QSpinBox(minimum=0, maximum=2**31 - 1, value=d.seed)
        self.seed.setToolTip("Seeds the arrivals and the request lengths")
        self.requests = QSpinBox(minimum=1, maximum=100_000, value=d.requests)
        self.requests.setToolTip("Requests to serve (the first N arrivals)")
        self.prompt_len = QLineEdit(d.prompt_len)
        self.prompt_len.setToolTip(
            "Prompt tokens: N, LO-HI (uniform) or lognormal:MEDIAN,SIGMA; empty with an LLM "
            "trace (Azure, BurstGPT, Mooncake): each request's own prompt and output"
        )
        self.new_tokens = QLineEdit(d.new_tokens)
        self.new_tokens.setToolTip("Tokens generated per request: N, LO-HI or lognormal:...")
        self.max_seqs = QSpinBox(minimum=1, maximum=1024, value=d.max_seqs)
        self.max_seqs.setToolTip("Sequences one engine decodes at once (continuous batching)")
        self.chunk_tokens = QSpinBox(minimum=1, maximum=65_536, value=d.chunk_tokens)
        self.chunk_tokens.setToolTip("Chunked prefill: prompt tokens per iteration")
        self.instances = QSpinBox(minimum=1, maximum=64, value=d.instances)
        self.instances.setToolTip(
            "Engines for colocated and chunked (default: as many as disaggregated uses). "
            "The real loop runs one: Run for real simulates that one-engine layout beside it."
        )
        self.prefill = QSpinBox(minimum=1, maximum=64, value=d.prefill_instances)
        self.prefill.setToolTip("Disaggregated: prefill instances")
        self.decode = QSpinBox(minimum=1, maximum=64, value=d.decode_instances)
        self.decode.setToolTip("Disaggregated: decode instances")
        self.kv_gbps = QDoubleSpinBox(
            minimum=0, maximum=10_000, value=d.kv_gbps, decimals=1, suffix=" Gb/s"
        )
        self.kv_gbps.setToolTip(
            "Disaggregated: the link that carries each prompt's KV cache "
            "from its prefill instance to a decode instance"
        )
        self.slo_ttft = special(
            QDoubleSpinBox(minimum=0, maximum=1e6, value=d.slo_ttft_ms, decimals=1, suffix=" ms"),
            "none",
        )
        self.slo_ttft.setToolTip(
            "Time to first token, from arrival: goodput counts requests within it (0: no SLO)"
        )
        self.slo_tpot = special(
            QDoubleSpinBox(minimum=0, maximum=1e6, value=d.slo_tpot_ms, decimals=2, suffix=" ms"),
            "none",
        )
        self.slo_tpot.setToolTip(
            "Time per output token after the first: goodput counts requests within it (0: no SLO)"
        )

        self.shared_groups = special(QSpinBox(minimum=0, maximum=100_000, value=d.shared_groups),
                                     "none")  # fmt: skip
        self.shared_groups.setToolTip(
            "Prompts begin with one of this many shared prefixes (a system prompt, a "
            "few-shot preamble), chosen at random per request (0: every prompt its own)"
        )
        self.shared_tokens = QSpinBox(minimum=1, maximum=1 << 20, value=d.shared_tokens)
        self.shared_tokens.setToolTip("Tokens of each shared prefix (part of the prompt)")
        self.prefix_blocks = special(
            QSpinBox(minimum=0, maximum=1 << 26, value=d.prefix_blocks, suffix=" blocks"), "off"
        )
        self.prefix_blocks.setToolTip(
            "A prefix cache of this many KV blocks per prefilling engine (LRU), of 16 tokens "
            "(a Mooncake trace's: its own 512, one per hash id): a prompt skips its cached "
            "leading blocks; simulated with and without, and served with it by Run for real "
            "(0: off)"
        )

        self.simulate_button = QPushButton("Simulate all layouts")
        self.simulate_button.setToolTip(
            "Calibrate the points the simulation needs (kept per model, precision, threads "
            "and machine: reused next time; live timing pauses meanwhile), then simulate the "
            "three layouts on the same requests"
        )
        self.measure_again = QPushButton("Measure again")
        self.measure_again.setToolTip(
            "Measure the calibration anew, then simulate: when the machine's speed has moved "
            "since the kept calibration was measured (its date is in the status line)"
        )
        self.live = QCheckBox("&Live")
        self.live.setToolTip(
            "Simulate again whenever a setting changes, half a second after the last change "
            "(Alt+L; the calibration is cached, and 100,000 requests simulate in about 2 s "
            "per layout). Each study lands in the session like one you start"
        )
        self.real_button = QPushButton("Run for real")
        self.real_button.setToolTip(
            "Serve the requests with the real loop in the chosen "
            "layout (live timing pauses meanwhile)"
        )
        self.real_layout = QComboBox()
        for key, label in LAYOUT_CHOICES:
            self.real_layout.addItem(label, key)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setTextVisible(False)  # a bar clips its text: the message is beside it
        self.progress.setMaximumWidth(120)
        self.progress.hide()
        self.status = QLabel("open a generating model (a genai folder) to compare layouts")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        traffic = QHBoxLayout()
        traffic.addWidget(QLabel("Traffic"))
        traffic.addWidget(self.traffic_kind)
        traffic.addWidget(self.rate, 1)
        traffic.addWidget(self.spec, 1)
        # the fields in as many columns as the dock's width holds: never sideways scrolling
        self.fields = ReflowGrid(pairs([
            ("Seed", self.seed), ("Requests", self.requests), ("Prompt", self.prompt_len),
            ("New tokens", self.new_tokens), ("Max seqs", self.max_seqs),
            ("Chunk", self.chunk_tokens), ("Instances", self.instances),
            ("Prefill inst", self.prefill), ("Decode inst", self.decode),
            ("KV link", self.kv_gbps), ("SLO TTFT", self.slo_ttft), ("SLO TPOT", self.slo_tpot),
            ("Shared prefixes", self.shared_groups), ("Prefix tokens", self.shared_tokens),
            ("Prefix cache", self.prefix_blocks),
        ], self))  # fmt: skip
        for cell in self.fields.cells:  # narrow fields: three columns in a 700 px dock
            for box in cell.findChildren(QDoubleSpinBox) + cell.findChildren(QSpinBox):
                box.setMinimumWidth(80)
        real = QWidget()
        real_row = QHBoxLayout()
        real_row.setContentsMargins(0, 0, 0, 0)
        real_row.addWidget(self.real_button)
        real_row.addWidget(self.real_layout, 1)
        real.setLayout(real_row)
        self.buttons = ReflowGrid(
            [self.simulate_button, self.measure_again, self.live, real, self.cancel_button]
        )
        # the bar shows how far; its message beside it, wrapped (a bar clips its text)
        self.progress_text = QLabel("")
        self.progress_text.setWordWrap(True)
        self.progress_text.hide()
        progress = QHBoxLayout()
        progress.addWidget(self.progress)
        progress.addWidget(self.progress_text, 1)

        self.table = QTableWidget(0, len(HEADERS))
        self.table.setHorizontalHeaderLabels(list(HEADERS))
        self.table.verticalHeader().hide()
        row_height = self.fontMetrics().height() + 6
        self.table.verticalHeader().setDefaultSectionSize(row_height)
        self.table.setMinimumHeight(6 * row_height)  # its header and the three layouts
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setToolTip(
            "TTFT and TPOT in ms (TTFT from arrival; TPOT per request, (last - first)/(n - 1)); "
            "goodput: requests per second within every SLO, and their share"
        )
        self.plot = LLMServingPlot()
        # the table and the chart: side by side where the results are short (a bottom dock
        # at 1600x1000 or 1024x700: stacked, the chart sat below the visible area), the
        # table above the chart where they are tall
        self.results = QSplitter(Qt.Orientation.Vertical)
        self.results.addWidget(self.table)
        self.results.addWidget(self.plot)
        self.results.setChildrenCollapsible(False)

        self.controls = QWidget()  # what scrolls: the last study's word, then the settings
        column = QVBoxLayout()  # each layout set once filled (tests/test_widget_items.py)
        column.setContentsMargins(0, 0, 4, 0)
        column.addWidget(self.status)
        column.addLayout(traffic)
        column.addWidget(self.fields)
        column.addStretch(1)
        self.controls.setLayout(column)
        # the form scrolls in its own share, so the results stay in view whatever it holds
        self.form_area = QScrollArea()
        self.form_area.setWidget(self.controls)
        self.form_area.setWidgetResizable(True)
        self.form_area.setFrameShape(QFrame.Shape.NoFrame)
        self.form_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.form_area.setMinimumHeight(FORM_MIN_HEIGHT)
        # the buttons and the progress above it, never scrolled out of reach
        self.form_side = QWidget()
        side = QVBoxLayout()
        side.setContentsMargins(0, 0, 0, 0)
        side.addWidget(self.buttons)
        side.addLayout(progress)
        side.addWidget(self.form_area, 1)
        self.form_side.setLayout(side)
        # the form beside the results in a wide dock, above them in a narrow one; sizes
        # follow the dock (widgets/models/llm_serving_arrangement.py) until the user drags a handle
        self.sides = QSplitter(Qt.Orientation.Vertical)
        self.sides.addWidget(self.form_side)
        self.sides.addWidget(self.results)
        self.sides.setChildrenCollapsible(False)
        self.user_sized = False
        for splitter in (self.sides, self.results):
            splitter.splitterMoved.connect(self._handle_dragged)
        self.outer = QVBoxLayout()
        self.outer.setContentsMargins(4, 4, 4, 4)
        self.outer.addWidget(self.sides)
        self.setLayout(self.outer)

        self.traffic_kind.currentIndexChanged.connect(self._kind_changed)
        self.setAcceptDrops(True)
        self.simulate_button.clicked.connect(self.simulate_requested)
        self.measure_again.clicked.connect(self.remeasure_requested)
        self.real_button.clicked.connect(self.real_requested)
        self.cancel_button.clicked.connect(self.cancel_requested)
        self.live.toggled.connect(self.live_toggled)
        for box in (
            self.rate,
            self.seed,
            self.requests,
            self.max_seqs,
            self.chunk_tokens,
            self.instances,
            self.prefill,
            self.decode,
            self.kv_gbps,
            self.slo_ttft,
            self.slo_tpot,
            self.shared_groups,
            self.shared_tokens,
            self.prefix_blocks,
        ):
            box.valueChanged.connect(self.settings_changed)
        for line in (self.spec, self.prompt_len, self.new_tokens):
            line.textChanged.connect(self.settings_changed)  # typed, or a trace dropped
        self.traffic_kind.currentIndexChanged.connect(self.settings_changed)
        self._kind_changed()

    # a trace dropped on the dock (TraceDrops): replayed, its own lengths unless the boxes
    # give some
    def set_trace(self, path: str) -> None:
        self.traffic_kind.setCurrentIndex(self.traffic_kind.findData("spec"))
        self.spec.setText(f"trace:{path}")
        self.prompt_len.clear()  # empty: each request's prompt and output from the trace

    def _kind_changed(self) -> None:
        poisson = self.traffic_kind.currentData() == "poisson"
        self.rate.setVisible(poisson)
        self.spec.setVisible(not poisson)

    # values and views -----------------------------------------------------------------
    def form(self) -> ServingForm:
        return ServingForm(
            traffic_kind=str(self.traffic_kind.currentData()),
            rate=self.rate.value(),
            spec=self.spec.text(),
            seed=self.seed.value(),
            requests=self.requests.value(),
            prompt_len=self.prompt_len.text(),
            new_tokens=self.new_tokens.text(),
            max_seqs=self.max_seqs.value(),
            chunk_tokens=self.chunk_tokens.value(),
            instances=self.instances.value(),
            prefill_instances=self.prefill.value(),
            decode_instances=self.decode.value(),
            kv_gbps=self.kv_gbps.value(),
            slo_ttft_ms=self.slo_ttft.value(),
            slo_tpot_ms=self.slo_tpot.value(),
            real_layout=str(self.real_layout.currentData()),
            shared_groups=self.shared_groups.value(),
            shared_tokens=self.shared_tokens.value(),
            prefix_blocks=self.prefix_blocks.value(),
        )

    def live_on(self) -> bool:
        """Live is ticked: a change of a setting simulates again."""
        return self.live.isChecked()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._arrange(event.size().width() - 8, event.size().height() - 8)

    def _handle_dragged(self, _pos: int, _index: int) -> None:
        self.user_sized = True  # the user's sizes kept until the arrangement changes

    def _arrange(self, width: int, height: int) -> None:
        """The form and the results, the table and the chart, placed for a dock of
        `width` x `height`; the user's dragged sizes kept while the orientations stay."""
        # the form never narrower than its fields (it does not scroll sideways: the dock does)
        bar = self.form_area.verticalScrollBar().sizeHint().width()
        self.form_area.setMinimumWidth(self.controls.minimumSizeHint().width() + bar)
        plan = arrange(
            width,
            height,
            table_min=self.table.minimumHeight(),
            chart_min=(self.plot.minimumWidth(), self.plot.minimumHeight()),
            handle=self.sides.handleWidth(),
            form_width=self.form_side.minimumSizeHint().width(),
            form_min=self.form_side.minimumSizeHint().height(),
        )
        changed = plan.sides_vertical != (
            self.sides.orientation() == Qt.Orientation.Vertical
        ) or plan.results_vertical != (self.results.orientation() == Qt.Orientation.Vertical)
        if changed:
            self.user_sized = False
        vertical, horizontal = Qt.Orientation.Vertical, Qt.Orientation.Horizontal
        self.sides.setOrientation(vertical if plan.sides_vertical else horizontal)
        self.results.setOrientation(vertical if plan.results_vertical else horizontal)
        if changed:  # the minimum the dock's scroll area goes by moves with them
            for splitter in (self.results, self.sides):
                splitter.updateGeometry()
            self.outer.invalidate()
        if not self.user_sized:
            self.sides.setSizes(list(plan.sides))
            self.results.setSizes(list(plan.results))

    def set_running(self, running: bool) -> None:
        self.simulate_button.setEnabled(not running)
        self.measure_again.setEnabled(not running)
        self.real_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        self.progress.setVisible(running)
        self.progress_text.setVisible(running)
        if running:
            self.progress.setRange(0, 0)

    def show_progress(self, done: float, total: float | None, message: str) -> None:
        """A bar of `done` out of `total` (a calibration's: seconds, with the time left in
        `message`), or busy when the total is unknown."""
        if total:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(1000 * min(done / total, 1.0)))
        else:
            self.progress.setRange(0, 0)
        if message:
            self.progress.setFormat(message)
            self.progress.setToolTip(message)
            self.progress_text.setText(message)

    def set_status(self, text: str, level: str = "info") -> None:
        color = {"error": theme.BAD, "warning": theme.WARN}.get(level)
        self.status.setStyleSheet(f"color: {color};" if color else "")
        self.status.setText(text)

    def show_table(
        self, table: LLMServingTable, slo_ttft: float | None, slo_tpot: float | None
    ) -> None:
        cells = table.cells()
        if not cells:  # each layout, waiting for Simulate all layouts
            pending = table.pending_cells()
            self.table.setRowCount(len(pending))
            for r, values in enumerate(pending):
                for c, text in enumerate(values):
                    item = QTableWidgetItem(text)
                    item.setForeground(QColor(theme.NEUTRAL))
                    item.setToolTip("Simulate all layouts fills this row; Run for real adds a "
                                    "measured row under it")  # fmt: skip
                    self.table.setItem(r, c, item)
            self.plot.set_data(table.chart(), slo_ttft, slo_tpot)
            return
        self.table.setRowCount(len(cells))
        for r, (row, values) in enumerate(zip(table.rows, cells, strict=True)):
            for c, text in enumerate(values):
                item = QTableWidgetItem(text)
                if 2 <= c < len(values) - 1:
                    item.setTextAlignment(
                        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                    )
                if c == len(values) - 1 and text in ("yes", "no"):
                    item.setForeground(QColor(theme.GOOD if text == "yes" else theme.BAD))
                if not row.simulated:
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                self.table.setItem(r, c, item)
        self.plot.set_data(table.chart(), slo_ttft, slo_tpot)
