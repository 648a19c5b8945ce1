"""Side by side: two runs of a session, metric deltas with confidence intervals and the
per-op differences (what fusion or quantization added, removed or sped up)."""

from __future__ import annotations

import math
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.host.background import Background
from engine.api import (
    OpDiff,
    OpScopeError,
    RunComparison,
    RunRow,
    SessionReader,
    compare_runs,
    default_pair,
    run_label,
)
from widgets.models.compare_rows import accuracy_rows

BETTER = QColor("#2e9d5b")
WORSE = QColor("#d0453b")
OP_COLUMNS = ["op", "op type", "status", "base ms", "cand ms", "Δ ms", "Δ %", "share", "bytes Δ"]
NAME_SHARE = 0.3  # of the table's width, at most, for each name column (op, op type)
NAME_MIN_PX = 120


class ComparePanel(QWidget):
    """Pick a baseline and a candidate run; shows `engine.analysis.run_compare.compare_runs`."""

    def __init__(
        self, reader: SessionReader, runs: list[RunRow], parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.reader = reader
        self.runs = {r.id: r for r in runs}
        self.baseline = QComboBox()
        self.candidate = QComboBox()
        for run in runs:  # id, where from, model, inputs, config: twenty runs read apart
            label = run_label(run)
            for box in (self.baseline, self.candidate):
                box.addItem(label, run.id)
                box.setItemData(box.count() - 1, label, Qt.ItemDataRole.ToolTipRole)
        for box in (self.baseline, self.candidate):
            box.setSizeAdjustPolicy(
                QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
            )
            box.setMinimumContentsLength(24)  # a long label is cut, its whole text on hover
        self.baseline.setToolTip("The reference run")
        self.candidate.setToolTip("The run compared against the baseline")
        pick = QHBoxLayout()
        pick.addWidget(QLabel("Baseline"))
        pick.addWidget(self.baseline, 1)
        pick.addWidget(QLabel("Candidate"))
        pick.addWidget(self.candidate, 1)
        self.summary = QLabel("Select two runs to compare them.")
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.summary.setWordWrap(True)
        self.metrics = QTableWidget(0, 5)
        self.metrics.setHorizontalHeaderLabels(["metric", "baseline", "candidate", "Δ", "95% CI"])
        self.metrics.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.ops = QTableWidget(0, len(OP_COLUMNS))
        self.ops.setHorizontalHeaderLabels(OP_COLUMNS)
        self.ops.setSortingEnabled(True)
        self.ops.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # long node names: both ends
        for table in (self.metrics, self.ops):
            table.verticalHeader().setVisible(False)
            table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        layout = QVBoxLayout()  # set once filled (tests/test_widget_items.py)
        layout.addLayout(pick)
        layout.addWidget(self.summary)
        layout.addWidget(self.metrics)  # as tall as its rows: every metric in view
        layout.addWidget(self.ops, 1)
        self.setLayout(layout)
        self.baseline.currentIndexChanged.connect(self.refresh)
        self.candidate.currentIndexChanged.connect(self.refresh)
        self.comparison: RunComparison | None = None
        self.job = Background("compare", self)
        pair, why = default_pair(runs)  # the two latest like-for-like runs
        if pair is not None:
            self.set_pair(*pair)
        else:
            self.summary.setText(f"Pick two runs: {why}.")

    def set_pair(self, baseline_id: int, candidate_id: int) -> None:
        self.baseline.blockSignals(True)
        self.baseline.setCurrentIndex(self.baseline.findData(baseline_id))
        self.baseline.blockSignals(False)
        self.candidate.setCurrentIndex(self.candidate.findData(candidate_id))
        self.refresh()

    def refresh(self) -> None:
        b, c = self.baseline.currentData(), self.candidate.currentData()
        self._clear()  # the numbers shown are another pair's from here on
        if b is None or c is None or b == c:
            self.job.cancel()  # a comparison still running is now stale
            self.summary.setText("Pick two different runs.")
            return
        self.summary.setText(f"Comparing run {c} with run {b}…")
        self.job.submit(lambda: self._compare(self.runs[b], self.runs[c]), self._show, self._failed)

    def _compare(self, baseline: RunRow, candidate: RunRow) -> RunComparison:
        """On a worker thread, with a reader of its own (the bootstrap over long runs
        takes seconds: the window must not stall)."""
        reader = SessionReader.open(self.reader.path)
        try:
            return compare_runs((reader, baseline), (reader, candidate))
        except ValueError as exc:
            raise OpScopeError(str(exc)) from exc
        finally:
            reader.close()

    def _failed(self, message: str) -> None:
        self.summary.setText(f"Cannot compare: {message}")

    def _show(self, comp: RunComparison) -> None:
        self.comparison = comp
        changed = "; ".join(f"{k} {v[0]} → {v[1]}" for k, v in comp.config_diff.items())
        notes = " ".join(comp.notes)
        self.summary.setText(f"{judgement(comp)} Changed: {changed or 'nothing'}. {notes}".strip())
        self._fill_metrics(comp)
        # matched by family (Conv -> QLinearConv): node names differ, the families tell more
        self._fill_ops(comp.op_types if comp.by_family or not comp.ops else comp.ops)

    def _clear(self) -> None:
        self.comparison = None
        self.metrics.setRowCount(0)
        self.ops.setRowCount(0)
        self._fit_metrics()

    def _fit_metrics(self) -> None:
        """Every metric row in view, without a scroll bar."""
        rows = sum(self.metrics.rowHeight(r) for r in range(self.metrics.rowCount()))
        header = self.metrics.horizontalHeader().height()
        scroll = self.metrics.horizontalScrollBar().sizeHint().height()
        self.metrics.setFixedHeight(header + rows + scroll + 2 * self.metrics.frameWidth())

    def _fill_metrics(self, comp: RunComparison) -> None:
        acc = accuracy_rows(comp.accuracy_delta)
        self.metrics.setRowCount(len(comp.metrics) + len(acc))
        for row, (name, m) in enumerate(comp.metrics.items()):
            better = (m.delta_pct > 0) == m.higher_is_better
            # coloured only where it is a result: like for like, neither side busy
            significant = (m.ci_pct[0] > 0 or m.ci_pct[1] < 0) and not (comp.unlike or comp.busy)
            cells = [
                f"{name} ({m.unit})",
                f"{m.baseline:.3f}",
                f"{m.candidate:.3f}",
                f"{m.delta_pct:+.1f}%",
                f"[{m.ci_pct[0]:+.1f}%, {m.ci_pct[1]:+.1f}%]",
            ]
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col >= 3 and significant:
                    item.setForeground(BETTER if better else WORSE)
                self.metrics.setItem(row, col, item)
        for row, figures in enumerate(acc, start=len(comp.metrics)):
            for col, text in enumerate([*figures, "–"]):
                self.metrics.setItem(row, col, QTableWidgetItem(text))
        self.metrics.resizeColumnsToContents()
        self._fit_metrics()

    def _fill_ops(self, diffs: list[OpDiff]) -> None:
        self.ops.setSortingEnabled(False)
        self.ops.setRowCount(len(diffs))
        for row, d in enumerate(diffs):
            pct = d.delta_time_pct
            bytes_delta = (d.cand_bytes or 0) - (d.base_bytes or 0)
            cells: list[tuple[str, float | None]] = [
                (d.key, None),
                (d.op_type, None),
                (d.status, None),
                (_ms(d.base_time_ms), d.base_time_ms),
                (_ms(d.cand_time_ms), d.cand_time_ms),
                (f"{d.delta_time_ms:+.3f}", d.delta_time_ms),
                (f"{pct:+.1f}%" if pct is not None else "–", pct),
                (f"{_share(d.base_share)} → {_share(d.cand_share)}", None),
                (f"{bytes_delta:+,}", float(bytes_delta)),
            ]
            for col, (text, value) in enumerate(cells):
                item = _NumItem(text, value)
                if col < 2:
                    item.setToolTip(text)
                if col == 5 and abs(d.delta_time_ms) > 0:
                    item.setForeground(WORSE if d.delta_time_ms > 0 else BETTER)
                self.ops.setItem(row, col, item)
        self.ops.setSortingEnabled(True)
        self.ops.sortItems(5, Qt.SortOrder.DescendingOrder)  # biggest slowdowns first
        self.fit_op_columns()

    def fit_op_columns(self) -> None:
        """Figures at their width; each name column (op, op type) at most NAME_SHARE of
        the table, its text elided in the middle and whole on hover."""
        self.ops.resizeColumnsToContents()
        cap = max(NAME_MIN_PX, int(self.ops.viewport().width() * NAME_SHARE))
        for col in (0, 1):
            if self.ops.columnWidth(col) > cap:
                self.ops.setColumnWidth(col, cap)

    def resizeEvent(self, event: Any) -> None:
        super().resizeEvent(event)
        if self.ops.rowCount():
            self.fit_op_columns()


class _NumItem(QTableWidgetItem):
    """Sorts by its number when it has one, so 10 ms sorts above 9 ms."""

    def __init__(self, text: str, value: float | None) -> None:
        super().__init__(text)
        self.value = value

    def __lt__(self, other: QTableWidgetItem) -> bool:
        mine, theirs = self.value, getattr(other, "value", None)
        if mine is not None and theirs is not None and not (math.isnan(mine) or math.isnan(theirs)):
            return bool(mine < theirs)
        return self.text() < other.text()


def judgement(comp: RunComparison) -> str:
    """Whether the deltas below are a result, first: no verdict for other shapes, none
    when a side was measured on a busy machine (each with its numbers)."""
    if comp.unlike:
        return f"No verdict: not like for like ({'; '.join(comp.unlike)})."
    if comp.busy:
        return (
            "No verdict: " + "; ".join(comp.busy) + ". Contention explains a difference as "
            "well as the change does."
        )
    return "Like for like, both measured quiet (or not measured):"


def _ms(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _share(x: float | None) -> str:
    return "–" if x is None else f"{x:.1%}"
