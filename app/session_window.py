"""A recorded session, read-only: its runs, their latency curves and op tables, and a
side-by-side comparison of two runs. The file is untrusted: opened read-only, validated,
and its text shown as plain text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QMainWindow,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.compare_panel import ComparePanel
from engine.analysis.run_summary import cell, summarize
from engine.measure.op_stats import OpStat
from engine.session.reader import SessionReader
from engine.session.rows import RunRow
from engine.session.store import open_session_file
from widgets.latency_plot import LatencyPlot
from widgets.op_table import OpTable

COLUMNS = [
    "run",
    "started",
    "model",
    "config",
    "provider",
    "p50 ms",
    "p99 ms",
    "samples/s",
    "cosine",
    "samples",
    "status",
]


class SessionWindow(QMainWindow):
    """Opens `path` read-only; raises SessionFileError (one line) for a bad file."""

    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.reader: SessionReader = open_session_file(path)
        self.runs: list[RunRow] = self.reader.runs()
        meta = self.reader.meta()
        self.setWindowTitle(f"Session — {Path(path).name} (read-only)")
        self.table = QTableWidget(len(self.runs), len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        for row, run in enumerate(self.runs):
            for col, text in enumerate(_cells(run)):
                item = QTableWidgetItem(text)  # plain text, whatever the file says
                if col in (0, 5, 6, 7, 8, 9):
                    item.setTextAlignment(
                        Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                    )
                self.table.setItem(row, col, item)
        self.table.resizeColumnsToContents()
        self.table.itemSelectionChanged.connect(self._selection_changed)

        self.latency = LatencyPlot()
        self.latency.set_follow(False)
        self.ops = OpTable()
        self.compare = ComparePanel(self.reader, self.runs)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.latency, "Latency")
        self.tabs.addTab(self.ops, "Operators")
        self.tabs.addTab(self.compare, "Compare")
        header = QLabel(
            " · ".join(
                f"{k}: {v}"
                for k, v in meta.items()
                if k in ("host", "cpu", "gpu", "onnxruntime", "created_at") and v
            )
        )
        header.setTextFormat(Qt.TextFormat.PlainText)
        header.setWordWrap(True)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(self.tabs)
        split.setStretchFactor(1, 3)
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.addWidget(header)
        layout.addWidget(split, 1)
        self.setCentralWidget(central)
        self.resize(1300, 850)
        if self.runs:
            self.table.selectRow(len(self.runs) - 1)

    def selected_runs(self) -> list[RunRow]:
        rows = sorted({i.row() for i in self.table.selectedIndexes()})
        return [self.runs[r] for r in rows]

    def _selection_changed(self) -> None:
        runs = self.selected_runs()
        if not runs:
            return
        self._show_latency(runs)
        last = runs[-1]
        nodes = [OpStat(**d) for d in self.reader.ops(last.id, "node")]
        types = [OpStat(**d) for d in self.reader.ops(last.id, "op_type")]
        self.ops.set_ops(nodes, types)
        if len(runs) >= 2:
            self.compare.set_pair(runs[0].id, runs[-1].id)

    def _show_latency(self, runs: list[RunRow]) -> None:
        """Selected runs on one time axis (wall clock), a marker at each run's start."""
        self.latency.clear()
        origins = [r.timing_origin_ns for r in runs if r.timing_origin_ns is not None]
        t0 = min(origins) if origins else 0
        for run in runs:
            starts, lats = self.reader.latency(run.id)
            if not lats.size:
                continue
            origin = (run.timing_origin_ns or t0) - t0
            t = (origin + starts) / 1e9
            self.latency.add_marker(float(t[0]), f"run {run.id}: {summarize(run).config}")
            self.latency.append(t, lats / 1e6, run.batch or 1)
        self.latency.show_all()

    def closeEvent(self, event: Any) -> None:
        self.reader.close()
        super().closeEvent(event)


def _cells(run: RunRow) -> list[str]:
    s = summarize(run)
    return [
        str(s.id),
        s.started_at,
        s.model,
        s.config,
        s.provider,
        cell(s.p50_ms, 3),
        cell(s.p99_ms, 3),
        cell(s.samples_per_s, 1),
        cell(s.cosine, 5),
        f"{s.samples:,}",
        s.status,
    ]
