"""One run id everywhere (issue 53): the Runs dock's `#` is the run's id in the session file
(the one Compare, the report and `opscope session show` use), also once a tune or a sweep
recorded runs of their own in between; and a run that measured nothing (a config applied
while timing is paused, then another) is neither recorded nor listed."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import numpy as np
from pytestqt.qtbot import QtBot

from app.desk import Desk
from app.runs.controller import RunsController, read_file_runs
from app.sessions.recording import Recording
from engine.events import GenerationStarted, GenerationSteps, RunEnded
from engine.model.info import load_model
from engine.session import Recorder, SessionStore
from engine.session.store import open_session_file
from tests.conftest import DEMO_CNN
from tests.session_material import live_events
from widgets.models.runs_summary import RunsSummary
from widgets.runs_table import COLUMNS, RunsTable


def _live_run(e: dict[str, Any], samples: bool = True) -> list[Any]:
    """One live run as the engine host sends it (a run with no samples: a config applied
    while timing was paused, ended by the next change)."""
    timed = [*e["batches"], e["done"]] if samples else []
    return [e["started"], e["accuracy"], *timed, RunEnded("ok")]


def _tune_records_runs(path: Path, e: dict[str, Any], n: int) -> None:
    """A tune's trials, recorded into the same file by a recorder of their own (as the
    tune job does, in its process)."""
    store = SessionStore.create_or_open(path)
    try:
        rec = Recorder(store, model_path=str(DEMO_CNN), kind="tune")
        for _ in range(n):
            rec.feed_many(_live_run(e))
        rec.close()
    finally:
        store.close()


def test_the_runs_docks_number_is_the_files_run_id_and_empty_runs_are_not_kept(
    qtbot: QtBot, tmp_path: Path
) -> None:
    path = tmp_path / "s.opscope"
    recording = Recording(path)
    desk = MagicMock(spec=Desk)
    desk.recording = recording
    summary = RunsSummary()
    table = RunsTable(summary)
    qtbot.addWidget(table)
    ctl = RunsController(desk, table, summary, parent=table)
    e = live_events(load_model(DEMO_CNN)[1])

    def live(batch: list[Any]) -> None:  # as the engine client delivers: sink, then the window
        recording.sink(batch)
        ctl.on_events(batch)

    live([e["loaded"], e["variant"], *_live_run(e)])  # file run 1
    recording.flush()
    _tune_records_runs(path, e, 3)  # file runs 2-4: the tune's
    live(_live_run(e, samples=False))  # applied during the pause: nothing measured
    live(_live_run(e))  # file run 5
    # a generating model's live run paused by a study before its first generation: its
    # shape alone is not a run (it read as a 0-sample run in the afternoon's file)
    shape = GenerationStarted(16, 6, 1, "greedy", 2048, 4096)
    live([e["started"], shape, RunEnded("ok")])
    steps = GenerationSteps(0, 0, np.array([3_000_000, 1_000_000], np.int64), e["origin"])
    live([e["started"], shape, steps, RunEnded("ok")])  # file run 6: one generation
    recording.close()

    with open_session_file(path) as reader:
        runs = reader.runs()
    assert [(r.id, r.kind) for r in runs] == [(1, "live"), (2, "tune"), (3, "tune"),
                                              (4, "tune"), (5, "live"), (6, "live")]  # fmt: skip
    assert all(r.samples for r in runs[:5])  # no run with 0 samples
    with open_session_file(path) as reader:
        assert reader.generation(6) is not None
    table.show()
    ctl.refresh()
    t = table.table
    cells = [[t.item(i, c) for c in (0, COLUMNS.index("from"))] for i in range(t.rowCount())]
    shown = [tuple(c.text() if c else "" for c in row) for row in cells]
    assert shown == [("1", "live"), ("5", "live"), ("6", "live")]  # the window's own runs
    ctl._add_file_runs(read_file_runs(str(path)))  # as the dock reads the file back
    cells = [[t.item(i, c) for c in (0, COLUMNS.index("from"))] for i in range(t.rowCount())]
    shown = [tuple(c.text() if c else "" for c in row) for row in cells]
    assert shown == [(str(i), k) for i, k in ((1, "live"), (2, "tune"), (3, "tune"),
                                              (4, "tune"), (5, "live"), (6, "live"))]  # fmt: skip
    table.pin(ctl.summary.rows()[ctl.run_ids().index(6)].index)
    assert table.note.text() == "Δ against run 6"
