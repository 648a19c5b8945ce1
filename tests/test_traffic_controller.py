"""The Traffic dock's controller against spec'd doubles of its dock and the job runner
(beside the whole-window load-run test in test_app_live.py): a load run and a calibration
are jobs on the loaded model through the one runner; Stop load is their Cancel; a failure
comes back in one line and frees the dock; a calibration's result feeds the What-if."""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

import pytest

pytest.importorskip("PySide6")

from app.host.job_runner import JobRunner
from app.traffic.traffic_controller import CALIBRATE_BATCH, TrafficController
from app.traffic.traffic_dock import TrafficDock
from engine.events import RunEnded, ServingStarted
from engine.run.serving_jobs import CalibrateRequest, LoadRunRequest
from engine.serve.batching import BatchPolicy

REQUEST = LoadRunRequest("poisson:50", BatchPolicy(max_batch=4).to_json(), duration_s=2.0)


def _controller() -> tuple[TrafficController, Any, Any, Any]:
    dock = MagicMock(spec=TrafficDock)
    for name in ("what_if", "serving_plot", "views", "calibrate_button", "max_batch"):
        setattr(dock, name, MagicMock())
    dock.instances = MagicMock()
    dock.max_batch.value.return_value = 8
    dock.instances.value.return_value = 2
    dock.slo_ms.return_value = None
    view, jobs = MagicMock(), MagicMock(spec=JobRunner)
    return TrafficController(dock, view, jobs, lambda: 0), dock, view, jobs


def _started(
    jobs: Any, concern: str, last: bool = False
) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    calls = [c for c in jobs.start.call_args_list if c.args[0] == concern]
    call = calls[-1] if last else calls[0]
    return call.args[1], call.args[2:], call.kwargs


def test_a_load_run_is_a_job_and_stop_load_is_its_cancel(qapp: Any) -> None:
    c, dock, view, jobs = _controller()
    c.run_load(REQUEST)
    request, _callbacks, kwargs = _started(jobs, "load")
    assert request is REQUEST
    dock.set_running.assert_called_with(True)
    c.on_events([ServingStarted({"spec": "poisson:50"}, {"max_batch": 4}, {}, 0.0, False)])
    assert c.serving
    c.stop_load()
    jobs.cancel.assert_any_call("load")
    c.on_events([RunEnded("cancelled", "stopped by the user")])  # what it served is kept
    assert not c.serving
    dock.set_running.assert_called_with(False)
    kwargs["on_cancelled"]()  # the job's end after its run's: nothing more to undo
    dock.set_running.assert_called_with(False)
    # the runner hears a job's end before the run's last events in the same batch: a job
    # that served leaves the ending to its run (or its summary would be dropped)
    c.run_load(REQUEST)
    _request, (on_done, _on_failed), _kwargs = _started(jobs, "load", last=True)
    c.on_events([ServingStarted({"spec": "poisson:50"}, {"max_batch": 4}, {}, 0.0, False)])
    on_done({"requests": {}})
    assert c.serving
    dock.set_running.assert_called_with(True)
    view.show_error.assert_not_called()


def test_a_failed_load_run_says_why_in_one_line_and_frees_the_dock(qapp: Any) -> None:
    c, dock, view, jobs = _controller()
    c.run_load(REQUEST)
    _request, (_on_done, on_failed), _kwargs = _started(jobs, "load")
    on_failed("the engine host died; the load run ended with it")
    view.show_error.assert_called_once_with(
        "load run", "the engine host died; the load run ended with it"
    )
    dock.set_running.assert_called_with(False)


def test_a_bad_traffic_spec_starts_nothing(qapp: Any) -> None:
    c, _dock, view, jobs = _controller()
    c.run_load(LoadRunRequest("poisson:-3", {"max_batch": 1}))
    jobs.start.assert_not_called()
    assert view.show_error.call_args.args[0] == "load run"


def test_a_calibration_is_a_job_whose_result_feeds_the_what_if(qapp: Any) -> None:
    c, dock, view, jobs = _controller()
    c.calibrate()
    request, (on_done, on_failed), kwargs = _started(jobs, "calibrate")
    assert request == CalibrateRequest(max(CALIBRATE_BATCH, 8), 2, remeasure=False)
    dock.calibrate_button.setEnabled.assert_called_with(False)
    on_done({"sizes": "not a calibration"})  # unreadable: said, nothing predicted
    assert c.service is None and "unreadable" in dock.what_if.set_text.call_args.args[0]
    c.calibrate()
    _request, (_on_done, on_failed), kwargs = _started(jobs, "calibrate")
    on_failed("a load run or calibration is still going: stop it first")
    assert "calibration failed: a load run" in dock.what_if.set_text.call_args.args[0]
    assert view.show_error.call_args.args[0] == "calibration"
    dock.calibrate_button.setEnabled.assert_called_with(True)
    kwargs["on_cancelled"]()
    assert "stopped" in dock.what_if.set_text.call_args.args[0]
    # what the calibration says on the way reaches the window: a warning its banner
    from engine.events import Notice, Progress

    moved = "calibration: the engine's speed moved +21% while it was timed"
    kwargs["on_events"]([Progress("calibrate", 1, 4, "timing"), Notice("warning", moved)])
    view.show_notice.assert_called_once_with("warning", moved)
