"""The Tune room's controller against spec'd doubles of its view and the desk (beside the
whole-window tune test in test_app_live.py): a tune is one job on the desk's workload (its
config the base, its inputs every trial's), live timing paused while it runs; trials and
progress reach the dock as they come; the best trial's command carries the shapes; Cancel
and failures go where they should; a trial chosen is applied live."""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

import pytest

pytest.importorskip("PySide6")

from app.desk import NO_MODEL, Desk
from app.tune.controller import CONCERN, TuneController
from app.tune.port import TuneViewPort
from engine.config import RunConfig
from engine.events import Progress
from engine.model.workload import JobInputs, Workload
from engine.tune.search import Goal, tune_result
from engine.tune.trial import Trial
from engine.tune.tune_job import TuneRequest

MODEL = "/models/bert.onnx"
INPUTS = JobInputs(shapes={"input_ids": (1, 256)}, dims={"sequence": 256})
WORKLOAD = Workload(MODEL, RunConfig(min_cosine=0.99), INPUTS)


def _controller() -> tuple[TuneController, Any, Any]:
    view = MagicMock(spec=TuneViewPort)
    view.space_items.return_value = ["precision=fp32,int8-dynamic", "threads=1"]
    view.objective_key.return_value = "p50"
    view.budget_trials.return_value = None
    view.trial_seconds.return_value = 0.5
    desk = MagicMock(spec=Desk)
    desk.jobs.busy.return_value = False
    return TuneController(desk, view), view, desk


def _started(desk: Any) -> tuple[TuneRequest, dict[str, Any]]:
    """The request the desk's recipe builds for its workload, and the callbacks."""
    ((concern, request), callbacks) = desk.run_on_workload.call_args
    assert concern == CONCERN and callbacks.pop("pause") == "paused: tuning"
    made = request(WORKLOAD)
    assert isinstance(made, TuneRequest)
    return made, callbacks


def test_a_tune_is_one_job_on_the_desks_workload(qapp: Any) -> None:
    c, view, desk = _controller()
    c.start()
    request, callbacks = _started(desk)
    assert request.workload == WORKLOAD  # the config is the base; the inputs every trial's
    assert request.space == {"precision": ["fp32", "int8-dynamic"], "threads": [1]}
    assert request.session is desk.session_path and request.duration_s == 0.5
    assert request.budget is None and request.goal == Goal("p50", 0.99)
    view.set_floor.assert_called_once_with(0.99)
    view.set_running.assert_called_with(True)

    t1 = Trial(1, RunConfig(threads=1), status="ok", p50_ms=2.0, p99_ms=3.0, cosine=1.0)
    t2 = Trial(2, RunConfig(precision="int8-dynamic", threads=1), status="failed", error="x")
    callbacks["on_events"]([Progress("tune", 1, 2, "trial 2/2"), t1, t2])
    view.show_progress.assert_called_with(1, 2, "trial 2/2")
    rows = [call.args[0] for call in view.add_trial.call_args_list]
    assert [r["#"] for r in rows] == [1, 2]
    assert rows[0]["status"] == "ok" and rows[1]["status"] == "failed: x"

    callbacks["on_done"](tune_result([t1, t2], c.goal, "exhaustive", 2))
    text = view.set_summary.call_args.args[0]
    assert "best: trial 1" in text and "--shape input_ids=1x256" in text
    view.set_running.assert_called_with(False)

    view.trial_chosen.connect.assert_called_once_with(c.apply_trial)
    c.apply_trial(2)  # failed: nothing to run
    desk.apply_config.assert_not_called()
    c.apply_trial(1)  # shown, run live, timing resumed: the desk's
    desk.apply_config.assert_called_once_with(t1.config)


def test_cancel_and_failure_reach_the_runner_and_the_window(qapp: Any) -> None:
    c, view, desk = _controller()
    (cancel_slot,) = view.cancel_requested.connect.call_args.args
    cancel_slot()
    desk.jobs.cancel.assert_called_once_with(CONCERN)

    c.start()
    _, callbacks = _started(desk)
    callbacks["on_cancelled"]()
    assert "cancelled after 0 trial(s)" in view.set_summary.call_args.args[0]
    view.set_running.assert_called_with(False)

    c.start()
    _, callbacks = _started(desk)
    callbacks["on_failed"]("the tune process was killed (SIGKILL)")
    desk.notify.assert_called_with(
        "error", "tune failed: the tune process was killed (SIGKILL).", key="error:tune"
    )
    view.set_running.assert_called_with(False)


def test_nothing_starts_without_a_model_or_with_a_bad_space_or_while_one_runs(
    qapp: Any,
) -> None:
    c, view, desk = _controller()
    c.start()
    ((_concern, _request), callbacks) = desk.run_on_workload.call_args
    callbacks["on_failed"](NO_MODEL)  # the desk's recipe, without a model: nothing began
    desk.notify.assert_called_with("error", f"tune failed: {NO_MODEL}.", key="error:tune")
    view.set_running.assert_not_called()
    view.set_summary.assert_not_called()
    desk.run_on_workload.reset_mock()
    view.space_items.return_value = ["warp=9"]
    c.start()
    assert "warp" in desk.notify.call_args.args[1]
    view.space_items.return_value = ["threads=1"]
    desk.jobs.busy.return_value = True
    c.start()
    desk.run_on_workload.assert_not_called()
    view.set_running.assert_not_called()
