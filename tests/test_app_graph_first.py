"""The Graph dock draws the graph as loaded as soon as the job sends it (issue 53: nothing
was drawn for a minute on a busy machine), says what is still being worked on, and ends on
the whole result as before: the graph as run, its provider, its fused nodes."""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

import pytest

pytest.importorskip("PySide6")
from pytestqt.qtbot import QtBot

from app.desk import Desk
from app.graph.controller import GraphController
from app.graph.view import GraphPanel
from engine.api import GraphRequest, GraphSoFar, Progress, RunConfig, Workload
from engine.events import drive
from engine.run.graph_job import graph_job
from tests.conftest import DEMO_TRANSFORMER

WORK = Workload(str(DEMO_TRANSFORMER), RunConfig())


def _job() -> tuple[list[Any], dict[str, Any]]:
    events: list[Any] = []
    result = drive(graph_job(GraphRequest(WORK, low_priority=True)), events.append)
    return events, result


def test_the_dock_draws_the_graph_as_loaded_first_then_the_whole_result(qtbot: QtBot) -> None:
    events, result = _job()
    parts = [e for e in events if isinstance(e, GraphSoFar)]
    assert parts, "the job sent no graph before its result"
    panel = GraphPanel()
    qtbot.addWidget(panel)
    panel.resize(1000, 600)
    panel.show()
    desk = MagicMock(spec=Desk)
    desk.configure_mock(workload=WORK, session_path="/tmp/none.opscope")
    desk.jobs.busy.return_value = False
    graph = GraphController(desk, panel)
    graph.lay_out(force=True)
    hooks = desk.run_on_workload.call_args.kwargs
    view = panel.view

    # the events up to the first graph so far: the graph as loaded is drawn, the rest said
    upto = events.index(parts[0]) + 1
    hooks["on_events"](events[:upto])
    assert view.scene_ is not None and view.scene_.kind == "loaded"
    assert view.view_combo.currentText() == "as loaded"
    assert len(view.canvas.items_by_name) == len(parts[0].result["views"]["loaded"]["nodes"])
    status = panel.status.text()
    assert status.startswith("144 nodes as loaded drawn; making the shapes of "), status
    assert status.endswith(" tensors (symbolic inference), the graph as run"), status
    assert panel.cancel_button.isEnabled()  # the job goes on
    view.view_combo.setCurrentText("as run")  # asked for before it exists: said so
    assert view.scene_ is None and "still being made" in view.note.text()
    view.view_combo.setCurrentText("as loaded")

    # the progress after it keeps saying what is drawn
    rest = events[upto:]
    hooks["on_events"](rest)
    assert panel.status.text().startswith("144 nodes as loaded drawn; graph: ")

    # the whole result: the graph as run, drawn as it was before the graph came in parts
    hooks["on_done"](result)
    assert view.scene_ is not None and view.scene_.kind == "run"
    assert view.view_combo.currentText() == "as run"
    assert set(view.canvas.items_by_name) == {n["name"] for n in result["views"]["run"]["nodes"]}
    assert panel.status.text().endswith("on CPUExecutionProvider"), panel.status.text()
    assert not panel.cancel_button.isEnabled()
    desk.show_node_memory.assert_called_once()


def test_a_progress_line_before_any_graph_reads_as_before(qtbot: QtBot) -> None:
    panel = GraphPanel()
    qtbot.addWidget(panel)
    desk = MagicMock(spec=Desk)
    desk.configure_mock(workload=WORK, session_path="/tmp/none.opscope")
    desk.jobs.busy.return_value = False
    graph = GraphController(desk, panel)
    graph.lay_out(force=True)
    desk.run_on_workload.call_args.kwargs["on_events"](
        [Progress("graph", 0, 4, "reading the model")]
    )
    assert panel.status.text() == "graph: reading the model"
