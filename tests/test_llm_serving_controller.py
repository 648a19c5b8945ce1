"""The LLM Serving room's controller against spec'd doubles of its view, its dock and the
desk (beside the whole-window tests in test_app_llm_serving.py), none given an attribute
by hand: a bad value is refused in one line and starts nothing; a study is one job of the
kind asked for through the desk's recipe (live timing paused meanwhile), in the live
precision when it is one the study serves; its rows, cancel and failure reach the view."""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

import pytest

pytest.importorskip("PySide6")

from app.desk import Desk
from app.llm_serving.controller import CONCERN, PAUSE, LLMServingController
from app.llm_serving.port import DockFrame, LLMServingViewPort
from engine.config import RunConfig
from engine.events import Notice, Progress
from engine.model.workload import Workload
from engine.serve.llm.study import LLMStudyRequest
from tests.conftest import ROOT
from widgets.models.llm_serving_form import ServingForm

DEMO_LLM = ROOT / "resources" / "models" / "demo_llm"


def _controller(form: ServingForm) -> tuple[LLMServingController, Any, Any]:
    view = MagicMock(spec=LLMServingViewPort)
    view.form.return_value = form
    view.live_on.return_value = False
    desk = MagicMock(spec=Desk)
    desk.jobs.busy.return_value = False
    c = LLMServingController(desk, view, MagicMock(spec=DockFrame))
    c.model_changed(str(DEMO_LLM))
    return c, view, desk


def started(desk: Any, precision: str = "fp32") -> tuple[LLMStudyRequest, dict[str, Any]]:
    """The study the controller last asked the desk to run, made for a live workload at
    `precision`, and the callbacks it gave."""
    (concern, make), callbacks = desk.run_on_workload.call_args
    assert concern == CONCERN
    live = Workload(str(DEMO_LLM), RunConfig(engine="onnxruntime-genai", precision=precision))
    request = make(live)
    assert isinstance(request, LLMStudyRequest)
    return request, callbacks


def test_a_bad_value_starts_nothing(qapp: Any) -> None:
    c, view, desk = _controller(ServingForm(rate=0.0))
    c.simulate()
    message, level = view.set_status.call_args.args
    assert level == "error" and "rate" in message and "\n" not in message
    desk.run_on_workload.assert_not_called()
    desk.pause_for.assert_not_called()


def test_a_study_is_one_job_and_its_answers_reach_the_view(qapp: Any) -> None:
    c, view, desk = _controller(ServingForm(requests=8, prompt_len="16-48", new_tokens="6"))
    c.simulate()
    request, callbacks = started(desk, "int4-weights")
    assert request.session is desk.session_path  # recorded beside the live runs
    assert request.kind == "simulate" and request.workload.model == str(DEMO_LLM)
    assert request.workload.config.precision == "int4-weights" and request.plan.requests == 8
    assert callbacks["pause"] == PAUSE == "paused: LLM serving"  # live timing paused
    view.set_running.assert_called_with(True)

    callbacks["on_events"]([Progress("calibration", 1, 4, "prefill 64"),
                            Notice("warning", "the machine is busy")])  # fmt: skip
    view.show_progress.assert_called_with(1, 4, "calibration: prefill 64")
    assert view.set_status.call_args.args == ("the machine is busy", "warning")
    callbacks["on_failed"]("the LLM serving study process crashed (SIGSEGV)")
    assert view.set_status.call_args.args == (
        "simulation failed: the LLM serving study process crashed (SIGSEGV)",
        "error",
    )
    view.set_running.assert_called_with(False)

    c.run_real()
    request, callbacks = started(desk, "int8")  # not one a study serves: fp32
    assert request.kind == "real" and request.plan.layout == "colocated"
    assert request.workload.config.precision == "fp32" and request.workload.config.batch == 1
    callbacks["on_cancelled"]()
    assert view.set_status.call_args.args == ("real run cancelled",)
    (cancel,) = view.cancel_requested.connect.call_args.args
    cancel()
    desk.jobs.cancel.assert_called_once_with(CONCERN)


def test_a_generating_model_shows_the_dock_and_another_hides_it(qapp: Any) -> None:
    view = MagicMock(spec=LLMServingViewPort)
    view.form.return_value = ServingForm()
    desk = MagicMock(spec=Desk)
    desk.jobs.busy.return_value = False
    frame = MagicMock(spec=DockFrame)
    c = LLMServingController(desk, view, frame)
    c.model_changed(str(DEMO_LLM))
    assert c.model == str(DEMO_LLM)
    frame.show.assert_called_once_with()
    frame.raise_.assert_called_once_with()
    c.model_changed(str(DEMO_LLM))  # the same model again (timing resumed): not raised again
    frame.raise_.assert_called_once_with()
    c.model_changed(str(ROOT / "resources" / "models" / "demo_cnn.onnx"))
    assert c.model is None
    frame.hide.assert_called_once_with()
