"""The Graph room's controller against doubles of its view and of the desk: no engine
host, no widgets (tests/test_app_graph.py drives the real thing)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest

from app.desk import Desk, Figures
from app.graph.controller import CONCERN, GraphController
from app.graph.port import GraphViewPort
from engine.api import GraphRequest, JobInputs, ModelInfo, RunConfig, Workload

pytestmark = pytest.mark.usefixtures("qapp")
WORK = Workload("/m/a.onnx", RunConfig(), JobInputs(dims={"sequence": 64}))


def _room(workload: Workload | None = WORK) -> tuple[GraphController, Any, Any]:
    view = MagicMock(spec=GraphViewPort)
    desk = MagicMock(spec=Desk)
    desk.configure_mock(workload=workload, session_path="/tmp/none.opscope")
    desk.jobs.busy.return_value = False
    desk.run_on_workload.return_value = True
    return GraphController(desk, view), view, desk


def _info(path: str) -> Any:
    info = MagicMock(spec=ModelInfo)
    info.configure_mock(path=path, name=Path(path).name)
    return info


def test_a_new_model_is_laid_out_once_its_dock_is_in_view() -> None:
    graph, view, desk = _room()
    graph.model_loaded(_info("/m/a.onnx"))
    assert not desk.run_on_workload.called and graph.wanted  # a hidden tab: later
    graph.shown(True)
    concern, make = desk.run_on_workload.call_args.args
    assert concern == CONCERN
    assert make(WORK) == GraphRequest(WORK, expand=False, low_priority=True)
    view.set_running.assert_called_with(True)
    # the job's result drawn, its node memory handed to the op table, the buttons back
    view.node_memory.return_value = {"n1": (1.0, 2.0)}
    nodes = [{"op": "Input"}, {"op": "Relu"}, {"op": "Output"}]
    desk.run_on_workload.call_args.kwargs["on_done"](
        {"views": {"run": {"nodes": nodes, "layout_s": 0.5}}, "provider_used": "CPU"}
    )
    view.set_result.assert_called_with(
        {"views": {"run": {"nodes": nodes, "layout_s": 0.5}}, "provider_used": "CPU"}
    )
    desk.show_node_memory.assert_called_once_with({"n1": (1.0, 2.0)})
    view.set_running.assert_called_with(False)
    view.set_status.assert_called_with(
        "1 nodes as run (as the config counts them; drawn besides: 2 input/output boxes); "
        "laid out in 0.50 s on CPU"
    )
    # the same workload again: nothing to lay out
    desk.run_on_workload.reset_mock()
    graph.variant_changed()
    assert not desk.run_on_workload.called


def test_another_config_lays_out_again_and_a_failure_lets_refresh_retry() -> None:
    graph, view, desk = _room()
    graph.shown(True)
    desk.run_on_workload.call_args.kwargs["on_failed"]("model.onnx: not a model")
    view.set_status.assert_called_with("graph failed: model.onnx: not a model")
    assert graph.drawn is None
    desk.run_on_workload.reset_mock()
    desk.configure_mock(workload=Workload(WORK.model, RunConfig(precision="int8-dynamic")))
    graph.variant_changed()
    assert desk.run_on_workload.called


def test_no_model_no_job_and_the_live_figures_are_painted() -> None:
    graph, view, desk = _room(workload=None)
    graph.shown(True)
    graph.lay_out(force=True)
    assert not desk.run_on_workload.called
    graph._figures(Figures([], None))
    view.set_figures.assert_called_once_with([], None)


def test_exports_say_when_there_is_nothing_to_export(tmp_path: Path) -> None:
    graph, view, _desk = _room()
    view.has_scene.return_value = False
    graph.save_image(str(tmp_path / "g.svg"))
    view.set_status.assert_called_with("nothing to export yet")
    view.has_scene.return_value = True
    view.render_image.side_effect = lambda path: Path(path).write_text("<svg/>")
    graph.save_image(str(tmp_path / "g.svg"))
    assert (tmp_path / "g.svg").read_text() == "<svg/>"
    assert not list(tmp_path.glob(".*part*"))


def test_a_job_refused_at_once_leaves_the_view_not_running() -> None:
    graph, view, desk = _room()

    def refuse(_concern: str, _make: object, **kw: Any) -> bool:
        kw["on_failed"]("the engine host is not running")
        return False

    desk.run_on_workload.side_effect = refuse
    graph.lay_out(force=True)
    view.set_running.assert_called_with(False)
    view.set_status.assert_called_with("graph failed: the engine host is not running")
