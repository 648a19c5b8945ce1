"""Issue 53: a tune's trials and a sweep's points are recorded in the session by jobs in
processes of their own, with ids of their own, and the Runs dock skipped them (its #18 was
run 22 in the file and the report). Every run of the session is a row now, with the id and
the kind the file gives it: the dock's ids are the file's, in order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("PySide6")
from PySide6.QtWidgets import QTableWidget
from pytestqt.qtbot import QtBot

from app.runs.controller import RunsController
from app.shell.workbench import Workbench
from engine.api import JobUpdate, SessionStore, open_session_file
from engine.session.origins import label
from tests.conftest import DEMO_CNN
from widgets.runs_table import RunsTable

TIMEOUT_MS = 180_000


def runs_table(wb: Workbench) -> QTableWidget:
    view = wb.window.dock("Runs").widget()
    assert isinstance(view, RunsTable)
    return view.table


def cell(table: QTableWidget, row: int, column: int) -> str:
    item = table.item(row, column)
    return "" if item is None else item.text()


def dock_rows(wb: Workbench) -> list[tuple[str, str]]:
    """The Runs dock's (#, kind) cells, top to bottom, as painted."""
    wb.room(RunsController).refresh()
    table = runs_table(wb)
    return [
        (cell(table, r, 0).replace(" ★", ""), cell(table, r, 1)) for r in range(table.rowCount())
    ]


def file_rows(path: Path) -> list[tuple[str, str]]:
    """The file's (id, where the run came from): 'tune 1, trial 2', or its kind."""
    with open_session_file(path) as reader:
        return [(str(r.id), label(r.origin, r.kind)) for r in reader.runs()]


@pytest.fixture
def wb(qtbot: QtBot, tmp_path: Path) -> Iterator[Workbench]:
    bench = Workbench(session_path=str(tmp_path / "runs.opscope"), usable=["cpu"])
    qtbot.addWidget(bench.window)
    bench.window.show()
    yield bench
    bench.shutdown()


def test_runs_another_process_records_are_rows(wb: Workbench, qtbot: QtBot) -> None:
    """No engine: two runs written into the window's session by another writer, as a
    tune's trial process writes them, then a job's end heard: both are rows, with the
    file's ids and kinds."""
    path = Path(wb.recording.path)
    with SessionStore.create_or_open(path) as store:  # another connection, as a trial's
        ids = []
        for p50, kind in ((1.5, "bench"), (2.5, "profile")):
            rid = store.start_run({"kind": kind, "model_path": str(DEMO_CNN)})
            store.update_run(rid, {"samples": 100, "p50_ms": p50, "p99_ms": 2 * p50})
            store.end_run(rid, "ok")
            ids.append(rid)
    wb.desk.on_events([JobUpdate(1, "done", None)])  # a job ended: what it left is read
    qtbot.waitUntil(lambda: len(dock_rows(wb)) == 2, timeout=10_000)
    assert dock_rows(wb) == file_rows(path) == [(str(ids[0]), "bench"), (str(ids[1]), "profile")]
    table = runs_table(wb)
    assert [cell(table, r, 6) for r in range(2)] == ["1.5", "2.5"]  # run p50 ms


def test_a_row_read_from_the_file_leaves_the_live_run_open() -> None:
    """Qt-free: a trial's row added while a live run goes on does not take its samples."""
    import numpy as np

    from widgets.models.runs_summary import RunsSummary

    s = RunsSummary()
    live = s.start("FP32 fusion=all batch=1 threads=2", "x 1x3", 1, "m.onnx")
    trial = s.recorded("INT8 dynamic", "x 1x3", "m.onnx", (100, 1.0, 2.0, 500.0), batch=1)
    s.add(np.arange(10) * 1e6, np.full(10, 2e6))
    rows = s.rows()
    assert rows[live].count == 10 and rows[live].running
    assert (rows[trial].count, rows[trial].p50_ms, rows[trial].running) == (100, 1.0, False)
