"""The Tune dock: a space to search (precisions, fusions, batches, threads), an objective
and a budget; Start and Cancel with progress; the trials as they end, in a table and on a
scatter with the Pareto front. Double-clicking a trial applies its config to the running
engine. Widgets, signals and setters only (app/tune/port.py says which);
app/tune/controller.py runs the search."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QFrame,
    QGridLayout,
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

from engine.api import PRECISION_LABELS
from widgets.spin_boxes import special
from widgets.tune_plot import TunePlot

PRECISIONS = ("fp32", "int8-dynamic", "int8-static", "fp16")
FUSIONS = ("off", "basic", "all")
COLUMNS = ("#", "config", "p50 ms", "p99 ms", "samples/s", "cosine", "status")


class TuneDock(QWidget):
    start_requested = Signal()
    cancel_requested = Signal()
    trial_chosen = Signal(int)  # a trial's number: apply its config

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.precisions = {
            p: QCheckBox(PRECISION_LABELS[p].replace("INT8 ", "INT8\u00a0")) for p in PRECISIONS
        }
        for p in ("fp32", "int8-dynamic", "int8-static"):
            self.precisions[p].setChecked(True)
        self.fusions = {f: QCheckBox(f) for f in FUSIONS}
        for f in ("basic", "all"):
            self.fusions[f].setChecked(True)
        self.batches = QLineEdit("1")
        self.batches.setToolTip("Batch sizes to try, comma-separated (e.g. 1,4,8)")
        self.threads = QLineEdit("0")
        self.threads.setToolTip("Thread counts to try (0: the default)")
        self.objective = QComboBox()
        for key, label in (("p50", "p50 (lower)"), ("p99", "p99 (lower)"),
                           ("throughput", "throughput (higher)")):  # fmt: skip
            self.objective.addItem(label, key)
        self.budget = special(QSpinBox(minimum=0, maximum=10_000, value=0), "all")
        self.budget.setToolTip("At most this many trials, chosen by optuna (all: exhaustive)")
        self.duration = QDoubleSpinBox(minimum=0.5, maximum=600, value=3.0, suffix=" s")
        self.duration.setToolTip("Seconds of timing per trial")
        self.start_button = QPushButton("Start tune")
        self.start_button.setToolTip(
            "Time every config of the space (live timing pauses; each trial in its own "
            "process, recorded in the session)"
        )
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.hide()
        self.summary = QLabel("no tune yet")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        form = QFormLayout()
        grid = QGridLayout()  # two by two: the dock stays narrow
        for i, box in enumerate(self.precisions.values()):
            grid.addWidget(box, i // 2, i % 2)
        form.addRow("Precision", grid)
        row = QHBoxLayout()
        for box in self.fusions.values():
            row.addWidget(box)
        form.addRow("Fusion", row)
        form.addRow("Batch", self.batches)
        form.addRow("Threads", self.threads)
        form.addRow("Objective", self.objective)
        form.addRow("Budget", self.budget)
        form.addRow("Per trial", self.duration)
        buttons = QHBoxLayout()
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.cancel_button)
        left = QWidget()
        left_column = QVBoxLayout()
        left_column.setContentsMargins(0, 0, 4, 0)
        left_column.addLayout(form)
        left_column.addLayout(buttons)
        left_column.addWidget(self.progress)
        left_column.addWidget(self.summary)
        left_column.addStretch(1)
        left.setLayout(left_column)
        scroll = QScrollArea()  # a short window scrolls the knobs instead of growing
        scroll.setWidget(left)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setMinimumWidth(220)

        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        # the figures sized to their text, the config the rest (cut, whole in its tooltip):
        # a long config pushed p50 out of view
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(COLUMNS.index("config"), QHeaderView.ResizeMode.Stretch)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.table.setToolTip("Double-click a trial to run its config live")
        self.plot = TunePlot()
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.plot)
        right.addWidget(self.table)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(scroll)
        split.addWidget(right)
        split.setStretchFactor(1, 1)
        split.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(split)

        self.start_button.clicked.connect(self.start_requested)
        self.cancel_button.clicked.connect(self.cancel_requested)
        self.table.cellDoubleClicked.connect(self._chosen)

    def space_items(self) -> list[str]:
        """The space as `--space` items (parsed, so bad text gets the CLI's one line)."""
        items = [
            "precision=" + ",".join(p for p, b in self.precisions.items() if b.isChecked()),
            "fusion=" + ",".join(f for f, b in self.fusions.items() if b.isChecked()),
            "batch=" + self.batches.text(),
            "threads=" + self.threads.text(),
        ]
        return [i for i in items if not i.endswith("=")]

    def objective_key(self) -> str:
        return str(self.objective.currentData())

    def budget_trials(self) -> int | None:
        """At most this many trials (None: every config of the space)."""
        return self.budget.value() or None

    def trial_seconds(self) -> float:
        return self.duration.value()

    def set_running(self, running: bool) -> None:
        self.start_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        self.progress.setVisible(running)

    def show_progress(self, done: float, total: float | None, message: str) -> None:
        if total:
            self.progress.setRange(0, int(total))
            self.progress.setValue(int(done))
        self.progress.setFormat(message)

    def set_summary(self, text: str) -> None:
        self.summary.setText(text)

    def set_floor(self, cosine: float) -> None:
        self.plot.set_floor(cosine)

    def set_trials(
        self, points: list[tuple[int, float, float]], front: list[int], best: int | None
    ) -> None:
        """(number, p50 ms, cosine) of the trials that ran, the front and the best on the
        scatter."""
        self.plot.set_trials(points, front, best)

    def clear(self) -> None:
        self.table.setRowCount(0)
        self.plot.set_trials([], [], None)

    def add_trial(self, row: dict[str, Any]) -> None:
        r = self.table.rowCount()
        self.table.insertRow(r)
        for c, key in enumerate(COLUMNS):
            item = QTableWidgetItem(str(row.get(key, "")))
            if key not in ("config", "status"):
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            if key == "config":
                item.setToolTip(item.text())
            self.table.setItem(r, c, item)

    def _chosen(self, row: int, _column: int) -> None:
        item = self.table.item(row, 0)
        if item is not None and item.text().isdigit():
            self.trial_chosen.emit(int(item.text()))
