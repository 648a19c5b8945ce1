"""The Graph dock on a model whose one profiled run would not end (issue 53: a Loop of 10^12
iterations): the dock says how long the run has taken while it waits, ends when the run
is stopped at its limit, draws the graph as run (optimized) and says what it lacks, and
why, in its status and in the view as run."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest

pytest.importorskip("PySide6")
from pytestqt.qtbot import QtBot

from app.desk import Desk
from app.graph.controller import GraphController
from app.graph.view import GraphPanel
from bench.probe_fuzz_models import loop_model
from engine.api import GraphRequest, Workload
from engine.events import drive
from engine.run.graph_job import graph_job


def test_the_dock_ends_on_a_loop_without_end_and_says_what_is_missing(
    qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    work = Workload(str(loop_model(10**12, tmp_path / "loop.onnx")))
    events: list[Any] = []
    result = drive(graph_job(GraphRequest(work, low_priority=True, run_limit_s=2.0)), events.append)
    panel = GraphPanel()
    qtbot.addWidget(panel)
    panel.resize(1000, 600)
    panel.show()
    desk = MagicMock(spec=Desk)
    desk.configure_mock(workload=work, session_path=str(tmp_path / "none.opscope"))
    desk.jobs.busy.return_value = False
    graph = GraphController(desk, panel)
    graph.lay_out(force=True)
    hooks = desk.run_on_workload.call_args.kwargs
    said = []
    for ev in events:  # one at a time, as batches come
        hooks["on_events"]([ev])
        said.append(panel.status.text())
    # "profiled run: 1 s so far (stopped at 2 s)", or on a machine too busy to tick within the
    # run's 2 s, "profiled run stopped at 2 s; its session closing: 3 s"
    assert any("graph: profiled run" in s and "stopped at 2 s" in s for s in said), said
    hooks["on_done"](result)
    status = panel.status.text()
    # said first, where a narrow dock still shows it; the whole line in its tooltip
    assert status.startswith("as run: the profiled inference was stopped after 2 s: no per-node")
    assert panel.status.toolTip() == status
    assert not panel.cancel_button.isEnabled()  # ended
    view = panel.view
    view.view_combo.setCurrentText("as run")
    assert view.scene_ is not None and view.scene_.kind == "run"  # drawn, optimized
    assert "stopped after 2 s" in view.note.text() and view.note.toolTip() == view.note.text()
