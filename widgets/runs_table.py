"""The runs table: one row per run of the live session (config, inputs, p50, p99,
samples/s, cosine) and its change against the run pinned as the baseline. It paints a
`RunsSummary` (widgets/models/runs_summary.py), which does the arithmetic."""

from __future__ import annotations

import math

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from widgets import theme
from widgets.models.runs_summary import RunRow, RunsSummary
from widgets.numbers import MISSING, figure

# p50/p99 here are over every sample of the run (the plot's header: its last samples)
COLUMNS = ("#", "from", "model", "config", "inputs", "machine", "run p50 ms", "Δ p50",
           "run p99 ms", "Δ p99", "samples/s", "Δ samples/s", "cosine")  # fmt: skip
TEXT_COLUMNS = tuple(COLUMNS.index(c) for c in ("from", "model", "config", "inputs"))
P50_DELTA = COLUMNS.index("Δ p50")
_WHOLE_RUN = (
    "over the whole run, every sample (n in each cell's tooltip; while a long run goes on, "
    "its newest 50,000). The plot's header and the status bar: over its last samples"
)
HEADER_TIPS = {
    "#": "The run's id in the session file: the same number in Compare, the report and "
    "`opscope session show`; a tune's trials and a sweep's points are rows too",
    "from": "Where the run came from: live (this window's engine), load, a tune's trial "
    "('tune 2, trial 7'), a sweep's point ('sweep 1, batch=4'), or a bench or profile run "
    "started from the command line; named the same in Compare, the report and `opscope "
    "session show`",
    "run p50 ms": f"p50 {_WHOLE_RUN}",
    "run p99 ms": f"p99 {_WHOLE_RUN}",
    "machine": "How busy the machine was while the run was measured: quiet, or busy with "
    "the CPUs other processes took (hover a cell for the numbers). A busy run's figures "
    "are the model's speed on a busy machine, and its Δ is no verdict",
}
RUN_FIGURES = (COLUMNS.index("run p50 ms"), COLUMNS.index("run p99 ms"))
DELTAS = (COLUMNS.index("Δ p50"), COLUMNS.index("Δ p99"), COLUMNS.index("Δ samples/s"))
MACHINE = COLUMNS.index("machine")


def _delta(value: float) -> str:
    return f"{value:+.1f}%" if math.isfinite(value) else MISSING


def interval(ci: tuple[float, float] | None) -> str:
    """'1.21-1.25 ms', or why there is none."""
    return "not known (too few samples)" if ci is None else f"{figure(ci[0])}-{figure(ci[1])} ms"


class RunsTable(QWidget):
    """Shows `summary`'s rows on `refresh()`; pins the selected run as the baseline."""

    baseline_changed = Signal(object)  # the pinned row index, or None

    def __init__(self, summary: RunsSummary, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary = summary
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        for name, tip in HEADER_TIPS.items():  # each figure says over which samples
            head = QTableWidgetItem(name)
            head.setToolTip(tip)
            self.table.setHorizontalHeaderItem(COLUMNS.index(name), head)
        self.table.verticalHeader().hide()
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._menu)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(False)  # a narrow dock scrolls; the config stays whole
        self.table.setWordWrap(False)
        self.table.setToolTip(
            "Every run of this session: each model, config, input size or resumed timing is "
            "one. run p50/p99: over every sample of the run (the plot's header and the "
            "status bar: over its last samples). Δ columns: change against the pinned "
            "baseline (right-click a run to pin it), coloured only when it is a result: "
            "the same model, inputs, batch and engine, neither run measured busy, and the "
            "95% intervals apart (hover a Δ for why not). "
            "Lower p50/p99 is better; higher samples/s is better."
        )
        self.pin_button = QPushButton("Pin as baseline")
        self.pin_button.setToolTip("The selected run becomes the one every Δ compares with")
        self.pin_button.clicked.connect(self.pin_selected)
        self.unpin_button = QPushButton("Unpin")
        self.unpin_button.clicked.connect(lambda: self.pin(None))
        self.unpin_button.setEnabled(False)
        self.note = QLabel("no baseline pinned")
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.pin_button)
        row.addWidget(self.unpin_button)
        row.addWidget(self.note, 1)
        layout = QVBoxLayout()  # set once filled (tests/test_widget_items.py)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addLayout(row)
        layout.addWidget(self.table, 1)
        self.setLayout(layout)
        self._shown: list[RunRow] = []
        self._ids: list[int | None] = []  # per summary row: its run id in the session file
        self._kinds: list[str] = []
        self._painted: tuple[list[RunRow], list[int | None], list[str]] | None = None

    def set_runs(self, ids: list[int | None], kinds: list[str]) -> None:
        """Each summary row's run id in the session file (None: not written yet, or not at
        all) and where it came from (live, load, "tune 2, trial 7"); shown from the next
        `refresh`."""
        self._ids, self._kinds = list(ids), list(kinds)

    def run_id(self, index: int) -> int | None:
        return self._ids[index] if 0 <= index < len(self._ids) else None

    def _name(self, index: int) -> str:
        rid = self.run_id(index)
        return f"run {rid}" if rid is not None else "this run"

    def pin(self, index: int | None) -> None:
        self.summary.pin(index)
        self.baseline_changed.emit(index)
        self.refresh()

    def pin_selected(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if rows and rows[0].row() < len(self._shown):
            self.pin(self._shown[rows[0].row()].index)

    def _menu(self, pos: QPoint) -> None:
        item = self.table.itemAt(pos)
        if item is None:
            return
        menu = QMenu(self)
        index = self._shown[item.row()].index
        pin = menu.addAction(f"Pin {self._name(index)} as baseline")
        pin.triggered.connect(lambda: self.pin(index))
        if self.summary.baseline is not None:
            menu.addAction("Unpin baseline").triggered.connect(lambda: self.pin(None))
        menu.exec(self.table.viewport().mapToGlobal(pos))

    def refresh(self) -> None:
        """Repaint from the summary (cells whose text did not change are left alone). A run
        that ended with nothing measured is not in the file, so not listed either."""
        all_rows = self.summary.rows()
        painted = (all_rows, list(self._ids), list(self._kinds))
        if painted == self._painted:
            return
        self._painted = painted
        rows = [
            r
            for r in all_rows
            if r.running or r.failed or r.count or self.run_id(r.index) is not None
        ]
        # in the file's order: a tune's trials, read back from the file, between the live
        # runs before and after them (a run not written yet last)
        rows.sort(key=lambda r: (self.run_id(r.index) is None, self.run_id(r.index) or 0, r.index))
        self._shown = rows
        grew = self.table.rowCount() != len(rows)
        self.table.setRowCount(len(rows))
        bold = QFont(self.font())
        bold.setBold(True)
        for pos, r in enumerate(rows):
            cosine = MISSING if r.cosine is None else f"{r.cosine:.5f}"
            state = " (running)" if r.running else " (failed)" if r.failed else ""
            rid = self.run_id(r.index)
            kind = self._kinds[r.index] if r.index < len(self._kinds) else MISSING
            texts = (
                (str(rid) if rid is not None else "…" if r.running else MISSING)
                + (" ★" if r.baseline else ""),
                kind,
                r.model or MISSING,
                r.label + state,
                r.inputs,
                r.machine or MISSING,
                figure(r.p50_ms),
                _delta(r.d_p50),
                figure(r.p99_ms),
                _delta(r.d_p99),
                figure(r.samples_per_s, 4),
                _delta(r.d_samples_per_s),
                cosine,
            )
            # lower latency and higher throughput are better; coloured only when judged
            goods = dict(zip(DELTAS, (-r.d_p50, -r.d_p99, r.d_samples_per_s), strict=True))
            judged = dict(zip(DELTAS, r.judged, strict=True))
            for c, text in enumerate(texts):
                item = self.table.item(pos, c)
                if item is None:
                    item = QTableWidgetItem()
                    if c not in TEXT_COLUMNS:
                        item.setTextAlignment(
                            Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                        )
                    self.table.setItem(pos, c, item)
                if item.text() != text:
                    item.setText(text)
                    if c in TEXT_COLUMNS:
                        item.setToolTip(text)
                if c in RUN_FIGURES:  # the count grows while the figure may not change
                    ci = r.p50_ci if c == RUN_FIGURES[0] else r.p99_ci
                    item.setToolTip(f"whole run, n={r.count:,}; 95% interval {interval(ci)}")
                elif c in DELTAS:
                    item.setToolTip(r.why_not or ("a result" if judged[c] else ""))
                elif c == MACHINE:
                    item.setToolTip(r.machine_line)
                item.setFont(bold if r.baseline else self.font())
                good = goods.get(c)
                if c == MACHINE and r.busy:
                    item.setForeground(QColor(theme.WARN))
                elif good is not None and judged.get(c) and math.isfinite(good):
                    item.setForeground(QColor(theme.GOOD if good > 0 else theme.BAD))
                else:
                    item.setData(Qt.ItemDataRole.ForegroundRole, None)
        base = self.summary.baseline
        self.note.setText("no baseline pinned" if base is None else f"Δ against {self._name(base)}")
        self.unpin_button.setEnabled(base is not None)
        if grew:
            self.table.scrollToBottom()
