"""The Tune dock's controller against spec'd doubles of its dock, the job runner and the
engine client (beside the whole-window tune test in test_app_live.py): a tune is one job
carrying the inputs the window shows; trials and progress reach the dock as they come; the
best trial's command carries the shapes; Cancel and failures go where they should; live
timing pauses and resumes."""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

import pytest

pytest.importorskip("PySide6")

from app.host.engine_client import EngineClient
from app.host.job_runner import JobRunner
from app.shell.pause_holds import PauseHolds
from app.tune.tune_controller import CONCERN, TuneController
from app.tune.tune_dock import TuneDock
from engine.config import RunConfig
from engine.events import Progress
from engine.run.job_inputs import JobInputs
from engine.tune.search import Goal, tune_result
from engine.tune.trial import Trial
from engine.tune.tune_job import TuneRequest

MODEL = "/models/bert.onnx"
INPUTS = JobInputs(shapes={"input_ids": (1, 256)}, dims={"sequence": 256})


class Bench(PauseHolds):
    """The workbench as the controller sees it: its window, client, runner and recording."""

    def __init__(self) -> None:
        self.window = MagicMock()
        self.window.config_panel.config.return_value = RunConfig(min_cosine=0.99)
        self.client = MagicMock(spec=EngineClient)
        self.client.last_load = (MODEL, {}, None)
        self.client.job_inputs.return_value = INPUTS
        self.jobs = MagicMock(spec=JobRunner)
        self.jobs.busy.return_value = False
        self.recording = MagicMock()
        self.recording.path = "/tmp/s.opscope"
        self.running = True
        self.toggles: list[str] = []

    def toggle_running(self, reason: str = "paused") -> None:
        self.running = not self.running
        self.toggles.append(reason)


def _controller() -> tuple[TuneController, Any, Bench]:
    dock = MagicMock(spec=TuneDock)
    dock.space_items.return_value = ["precision=fp32,int8-dynamic", "threads=1"]
    dock.objective = MagicMock()
    dock.objective.currentData.return_value = "p50"
    for name in ("budget", "duration", "summary", "plot"):
        setattr(dock, name, MagicMock())
    dock.budget.value.return_value = 0
    dock.duration.value.return_value = 0.5
    wb = Bench()
    return TuneController(dock, wb), dock, wb


def _started(wb: Bench) -> tuple[TuneRequest, dict[str, Any]]:
    ((concern, request), callbacks) = wb.jobs.start.call_args
    assert concern == CONCERN and isinstance(request, TuneRequest)
    return request, callbacks


def test_a_tune_is_one_job_with_the_windows_inputs(qapp: Any) -> None:
    c, dock, wb = _controller()
    c.start()
    request, callbacks = _started(wb)
    assert request.model == MODEL and request.inputs == INPUTS
    assert request.space == {"precision": ["fp32", "int8-dynamic"], "threads": [1]}
    assert request.session == "/tmp/s.opscope" and request.duration_s == 0.5
    assert request.budget is None and request.goal == Goal("p50", 0.99)
    assert wb.toggles == ["paused: tuning"] and not wb.running
    wb.recording.flush.assert_called_once()
    dock.set_running.assert_called_with(True)

    t1 = Trial(1, RunConfig(threads=1), status="ok", p50_ms=2.0, p99_ms=3.0, cosine=1.0)
    t2 = Trial(2, RunConfig(precision="int8-dynamic", threads=1), status="failed", error="x")
    callbacks["on_events"]([Progress("tune", 1, 2, "trial 2/2"), t1, t2])
    dock.show_progress.assert_called_with(1, 2, "trial 2/2")
    rows = [call.args[0] for call in dock.add_trial.call_args_list]
    assert [r["#"] for r in rows] == [1, 2]
    assert rows[0]["status"] == "ok" and rows[1]["status"] == "failed: x"

    callbacks["on_done"](tune_result([t1, t2], c.goal, "exhaustive", 2))
    text = dock.summary.setText.call_args.args[0]
    assert "best: trial 1" in text and "--shape input_ids=1x256" in text
    assert wb.running and wb.toggles[-1] == "paused"  # resumed
    dock.set_running.assert_called_with(False)


def test_cancel_and_failure_reach_the_runner_and_the_window(qapp: Any) -> None:
    c, dock, wb = _controller()
    (cancel_slot,) = dock.cancel_requested.connect.call_args.args
    cancel_slot()
    wb.jobs.cancel.assert_called_once_with(CONCERN)

    c.start()
    _, callbacks = _started(wb)
    callbacks["on_cancelled"]()
    assert "cancelled after 0 trial(s)" in dock.summary.setText.call_args.args[0]
    assert wb.running

    c.start()
    _, callbacks = _started(wb)
    callbacks["on_failed"]("the tune process was killed (SIGKILL)")
    wb.window.show_error.assert_called_with("tune", "the tune process was killed (SIGKILL)")
    assert wb.running


def test_nothing_starts_without_a_model_or_with_a_bad_space(qapp: Any) -> None:
    c, dock, wb = _controller()
    wb.client.last_load = None
    c.start()
    wb.window.show_error.assert_called_with("tune", "load a model first")
    wb.client.last_load = (MODEL, {}, None)
    dock.space_items.return_value = ["warp=9"]
    c.start()
    assert "warp" in wb.window.show_error.call_args.args[1]
    wb.jobs.start.assert_not_called()
    assert wb.running and wb.toggles == []
