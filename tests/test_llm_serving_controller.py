"""The LLM Serving dock's controller against spec'd doubles of its dock, frame, job runner
and engine client (beside the whole-window tests in test_app_llm_serving.py): a bad value
is refused in one line and starts nothing; a study is one job of the kind asked for, in the
live precision when it is one the study serves; its rows, cancel and failure reach the dock;
live timing pauses and resumes."""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

import pytest

pytest.importorskip("PySide6")
from PySide6.QtWidgets import QDockWidget

from app.host.engine_client import EngineClient
from app.host.job_runner import JobRunner
from app.llm.llm_serving_controller import CONCERN, LLMServingController
from app.llm.llm_serving_dock import LLMServingDock
from app.shell.pause_holds import PauseHolds
from engine.config import RunConfig
from engine.events import Notice, Progress
from engine.serve.llm.study import LLMStudyRequest
from tests.conftest import ROOT
from widgets.models.llm_serving_form import ServingForm

DEMO_LLM = ROOT / "resources" / "models" / "demo_llm"


class Bench(PauseHolds):
    def __init__(self, precision: str) -> None:
        self.window = MagicMock()
        self.window.config_panel.config.return_value = RunConfig(
            engine="onnxruntime-genai", precision=precision
        )
        self.client = MagicMock(spec=EngineClient)
        self.client.last_load = None
        self.jobs = MagicMock(spec=JobRunner)
        self.jobs.busy.return_value = False
        self.recording = MagicMock()
        self.recording.path = "/tmp/window.opscope"
        self.running = True
        self.toggles: list[str] = []

    def toggle_running(self, reason: str = "paused") -> None:
        self.running = not self.running
        self.toggles.append(reason)


def _controller(form: ServingForm, precision: str = "fp32") -> tuple[Any, Any, Bench]:
    dock = MagicMock(spec=LLMServingDock)
    dock.form.return_value = form
    dock.live = MagicMock()  # made in __init__: not in spec
    dock.live.isChecked.return_value = False
    wb = Bench(precision)
    c = LLMServingController(dock, MagicMock(spec=QDockWidget), wb)
    c.model_changed(str(DEMO_LLM))
    return c, dock, wb


def test_a_bad_value_starts_nothing(qapp: Any) -> None:
    c, dock, wb = _controller(ServingForm(rate=0.0))
    c.simulate()
    message, level = dock.set_status.call_args.args
    assert level == "error" and "rate" in message and "\n" not in message
    wb.jobs.start.assert_not_called()
    assert wb.running and wb.toggles == []


def test_a_study_is_one_job_and_its_answers_reach_the_dock(qapp: Any) -> None:
    c, dock, wb = _controller(ServingForm(requests=8, prompt_len="16-48", new_tokens="6"),
                              "int4-weights")  # fmt: skip
    c.simulate()
    (concern, request), callbacks = wb.jobs.start.call_args
    assert concern == CONCERN and isinstance(request, LLMStudyRequest)
    assert request.session == "/tmp/window.opscope"  # recorded beside the live runs
    assert request.kind == "simulate" and request.model == str(DEMO_LLM)
    assert request.config.precision == "int4-weights" and request.plan.requests == 8
    assert wb.toggles == ["paused: LLM serving"] and not wb.running

    callbacks["on_events"]([Progress("calibration", 1, 4, "prefill 64"),
                            Notice("warning", "the machine is busy")])  # fmt: skip
    dock.show_progress.assert_called_with(1, 4, "calibration: prefill 64")
    assert dock.set_status.call_args.args == ("the machine is busy", "warning")
    callbacks["on_failed"]("the LLM serving study process crashed (SIGSEGV)")
    assert dock.set_status.call_args.args == (
        "simulation failed: the LLM serving study process crashed (SIGSEGV)",
        "error",
    )
    assert wb.running  # resumed

    c.run_real()
    (_, request), callbacks = wb.jobs.start.call_args
    assert request.kind == "real" and request.plan.layout == "colocated"
    callbacks["on_cancelled"]()
    assert dock.set_status.call_args.args == ("real run cancelled",) and wb.running
    (cancel,) = dock.cancel_requested.connect.call_args.args
    cancel()
    wb.jobs.cancel.assert_called_once_with(CONCERN)
