"""A recorded session, read-only: its runs, their latency curves and op tables, and a
side-by-side comparison of two runs. The file is untrusted: opened read-only, validated,
and its text shown as plain text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import Qt, Signal
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

from app.desk.notices import Notices
from app.host.job_runner import JobRunner
from app.sessions.compare_panel import ComparePanel
from app.sessions.exports import ExportNotice, add_export_actions
from app.sessions.recorded_studies import studies_tab
from engine.api import (
    GraphRequest,
    JobInputs,
    OpScopeError,
    OpStat,
    RunRow,
    SessionReader,
    Workload,
    escape_controls,
    lacking_note,
    machine_text,
    open_session_file,
    run_table,
    summarize,
    with_recorded_stats,
)
from widgets.graph_view import GraphView
from widgets.latency_plot import LatencyPlot
from widgets.op_table import OpTable

COLUMNS = [c.name for c in run_table.BRIEF]
NUMERIC = {i for i, c in enumerate(run_table.BRIEF) if c.numeric}


class SessionWindow(QMainWindow):
    """Opens `path` read-only; raises SessionFileError (one line) for a bad file. Its exports
    run as jobs through `jobs`, the window's one runner; `closed` once it has closed."""

    closed = Signal()

    def __init__(self, path: str | Path, jobs: JobRunner) -> None:
        super().__init__()
        self.reader: SessionReader = open_session_file(path)
        self.path = str(path)
        try:
            self.runs: list[RunRow] = [self._with_samples(r) for r in self.reader.runs()]
            meta = self.reader.meta()
            machines = self.reader.machines()
        except BaseException:
            self.reader.close()
            raise
        self.setWindowTitle(f"Session — {Path(path).name} (read-only)")
        self.table = QTableWidget(len(self.runs), len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        for row, run in enumerate(self.runs):
            for col, text in enumerate(run_table.cells(summarize(run))):
                item = QTableWidgetItem(text)  # plain text, whatever the file says
                if col in NUMERIC:
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
        self.graph = GraphView()  # the selected run's graph, its recorded profile painted
        self.graph_status = QLabel("")
        self.graph_status.setMinimumWidth(1)
        self.graph.foot.addWidget(self.graph_status, 1)
        self.tabs.addTab(self.graph, "Graph")
        try:
            studies = studies_tab(self.reader)
        except OpScopeError as exc:  # a damaged study: the runs still open, the cause said
            studies = QLabel(f"Studies: {exc}")
            studies.setTextFormat(Qt.TextFormat.PlainText)
        if studies is not None:
            self.tabs.addTab(studies, "Studies")
        self.jobs = jobs
        self.nodes: list[OpStat] = []
        self.graph_concern = f"session-graph-{id(self)}"
        self.graph_drawn: int | None = None  # the run whose graph is shown (or asked for)
        self.tabs.currentChanged.connect(lambda _: self._graph_for_selection())
        header = QLabel(
            " · ".join(
                f"{k}: {v}"
                for k, v in meta.items()
                if k in ("host", "cpu", "gpu", "onnxruntime", "created_at") and v
            )
        )
        for name, facts in machines.items():  # engine hosts the runs ran on over SSH
            header.setText(f"{header.text()}\nengine host {name}: {machine_text(facts)}")
        header.setTextFormat(Qt.TextFormat.PlainText)
        header.setWordWrap(True)
        lacking = lacking_note(self.reader.lacking)
        if lacking:  # the file's "-" cells have a reason
            header.setText(f"{header.text()}\nThis file {lacking}.")
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(self.tabs)
        split.setStretchFactor(1, 3)
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.addWidget(header)
        self.exports = ExportNotice(jobs, self)
        layout.addWidget(self.exports)
        layout.addWidget(split, 1)
        # a teammate's file is exported from its own window (File > Export in the main
        # window writes your own session); the trace of the run selected here
        file_menu = self.menuBar().addMenu("&File")
        add_export_actions(
            self, file_menu, lambda: self.path, self.exports,
            selected=lambda: [r.id for r in self.selected_runs()],
        )  # fmt: skip
        file_menu.addAction("&Close", self.close, "Ctrl+W")
        self.setCentralWidget(central)
        self.notify = Notices(None, self.statusBar()).notify  # no banner: the status bar
        self.resize(1300, 850)
        if self.runs:
            self.table.selectRow(len(self.runs) - 1)

    def _with_samples(self, run: RunRow) -> RunRow:
        """A run still running (or killed) has no stored summary: figures from its samples;
        samples the reader refuses leave the row as stored ('-')."""
        if run.latency is not None or not run.samples:
            return run
        try:
            return with_recorded_stats(run, self.reader.latency(run.id)[1])
        except OpScopeError:
            return run

    def selected_runs(self) -> list[RunRow]:
        rows = sorted({i.row() for i in self.table.selectedIndexes()})
        return [self.runs[r] for r in rows]

    def _selection_changed(self) -> None:
        runs = self.selected_runs()
        if not runs:
            return
        try:
            self._show_runs(runs)
        except OpScopeError as exc:  # a damaged part of the file: one line, the rest stays
            self.notify("error", escape_controls(str(exc)))
        else:
            self.statusBar().clearMessage()

    def _show_runs(self, runs: list[RunRow]) -> None:
        self._show_latency(runs)
        last = runs[-1]
        nodes = self.reader.ops(last.id, "node")
        types = self.reader.ops(last.id, "op_type")
        self.ops.set_ops(nodes, types)
        if len(runs) >= 2:
            self.compare.set_pair(runs[0].id, runs[-1].id)
        self.nodes = nodes
        self._graph_for_selection()

    def _graph_for_selection(self) -> None:
        """With the Graph tab shown: the selected run's graph (the graph job, for its model
        file, config and input shapes, when the file is on this machine), with the run's
        recorded per-node figures painted on it."""
        runs = self.selected_runs()
        if self.tabs.currentWidget() is not self.graph or not runs:
            return
        run = runs[-1]
        if run.id == self.graph_drawn:
            return
        self.graph_drawn = run.id
        self.jobs.forget(self.graph_concern)
        self.graph.set_result(None)
        if not run.model_path or run.config is None or not Path(run.model_path).is_file():
            where = escape_controls(run.model_path or "not recorded")
            self.graph_status.setText(f"run {run.id}: its model file ({where}) is not on this "
                                      "machine, so its graph cannot be drawn")  # fmt: skip
            return
        shapes = {k: tuple(v["shape"]) for k, v in run.inputs.items() if v.get("shape")}
        request = GraphRequest(
            Workload(run.model_path, run.config, JobInputs(shapes=shapes)), low_priority=True
        )
        self.graph_status.setText(f"run {run.id}: laying out its graph")
        nodes = list(self.nodes)

        def done(result: dict[str, Any]) -> None:
            self.graph.set_result(result)
            self.graph.set_figures(nodes, None)
            self.graph_status.setText(
                f"run {run.id}: {summarize(run).config}; its recorded profile on the graph"
                if nodes
                else f"run {run.id}: no profile recorded, the graph alone"
            )

        def failed(why: str) -> None:
            self.graph_drawn = None
            self.graph_status.setText(f"run {run.id}: graph failed: {escape_controls(why)}")

        self.jobs.start(self.graph_concern, request, on_done=done, on_failed=failed,
                        on_cancelled=lambda: None)  # fmt: skip

    def _show_latency(self, runs: list[RunRow]) -> None:
        """Selected runs on one time axis (wall clock), a marker at each run's start."""
        self.latency.clear()
        origins = [r.timing_origin_ns for r in runs if r.timing_origin_ns is not None]
        t0 = min(origins) if origins else 0
        end = -np.inf
        for run in runs:
            starts, lats = self.reader.latency(run.id)
            if not lats.size:
                continue
            origin = (run.timing_origin_ns or t0) - t0
            t = (origin + starts) / 1e9
            if np.any(np.diff(t) < 0):  # a simulated run's requests, a damaged file
                order = np.argsort(t, kind="stable")
                t, lats = t[order], lats[order]
            if t[0] < end:  # no timing origin, or runs that overlapped: after the last
                t = t + (end - t[0])
            end = float(t[-1])
            s = summarize(run)  # where it came from too: a tune's trial, a sweep's point
            self.latency.add_marker(float(t[0]), f"run {run.id} ({s.origin}): {s.config}")
            self.latency.append(t, lats / 1e6, run.batch or 1)
        self.latency.show_all()

    def closeEvent(self, event: Any) -> None:
        self.jobs.forget(self.graph_concern)
        self.exports.close_jobs()
        self.reader.close()
        super().closeEvent(event)
        self.closed.emit()
