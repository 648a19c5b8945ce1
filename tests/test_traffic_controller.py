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
from engine.events import RunEnded, ServingStarted, ServingSummary
from engine.run.serving_jobs import CalibrateRequest, LoadRunRequest
from engine.serve.batching import BatchPolicy

REQUEST = LoadRunRequest("poisson:50", BatchPolicy(max_batch=4).to_json(), duration_s=2.0)


def _controller() -> tuple[TrafficController, Any, Any, Any]:
    dock = MagicMock(spec=TrafficDock)
    for name in (
        "what_if", "serving_plot", "views", "calibrate_button", "cancel_button", "max_batch",
    ):  # fmt: skip
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
    dock.set_calibrating.assert_called_with(True)  # its progress and Cancel; no Run load
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


def test_a_calibration_shows_its_time_left_and_cancel_stops_it(qapp: Any) -> None:
    """4-5 minutes with no progress, no estimate and no Cancel: now its progress (with the
    time left) is on the dock's bar, Cancel asks the job to stop, and a stopped one says
    nothing of it was kept."""
    from engine.events import Progress

    c, dock, _view, jobs = _controller()
    c.calibrate()
    _request, _callbacks, kwargs = _started(jobs, "calibrate")
    said = "timing batches of 1-32 shuffled: batch 16, 3 of 9 timed; about 25 s left"
    kwargs["on_events"]([Progress("calibrate", 12.0, 37.0, said)])
    dock.show_progress.assert_called_with(12.0, 37.0, said)
    # a job on the loaded model streams on the host's own stream, as a run does
    c.on_events([Progress("calibrate", 14.0, 38.0, "about 24 s left")])
    dock.show_progress.assert_called_with(14.0, 38.0, "about 24 s left")
    c.cancel_calibration()
    jobs.cancel.assert_called_with("calibrate")
    dock.cancel_button.setEnabled.assert_called_with(False)
    kwargs["on_cancelled"]()
    dock.set_calibrating.assert_called_with(False)
    assert "nothing of it was kept" in dock.what_if.set_text.call_args.args[0]
    dock.show_progress.reset_mock()
    c.on_events([Progress("calibrate", 15.0, 38.0, "late")])  # ended: not shown
    dock.show_progress.assert_not_called()


def test_an_answer_shows_its_flags_and_the_max_rate_read_off_its_curve(qapp: Any) -> None:
    c, dock, _view, _jobs = _controller()
    dock.traffic_spec.return_value = "poisson:3"
    from engine.serve.sim.what_if_flags import PAST_CAPACITY as past

    c._answered(
        {
            "offered_rate": 3.0,
            "prediction": {"latency_ms": {"p50": 900.0, "p99": 4000.0},
                           "throughput": {"requests_per_s": 2.0}},
            "current": None,
            "proposed": [],
            "max_rate": 1.43,
            "max_rate_beyond": False,
            "flags": [past],
            "calibration": "calibrated quiet: others used 0.02 of 2 CPUs",
        }
    )  # fmt: skip
    dock.what_if.set_flags.assert_called_with([past])
    text = dock.what_if.set_text.call_args.args[0]
    assert "max rate under the SLO 1.43/s" in text and "calibrated quiet" in text


def test_a_real_run_is_held_against_the_spread_of_its_rows_earlier_runs(qapp: Any) -> None:
    """The second real run of a row: its check gets the first as the real system's own
    repeat, and the calibration's contention beside the run's."""
    import numpy as np

    from engine.measure.contention import Contention
    from engine.serve.sim.service import ServiceModel

    c, _dock, _view, _jobs = _controller()
    quiet = Contention(window_s=30.0, cpus=2, others_cpu=0.01, steal=0.0, own_cpu=1.9)
    c.service = ServiceModel({1: np.full(9, 0.002), 4: np.full(9, 0.004)}, {"instances": 1},
                             contention=quiet)  # fmt: skip
    real_job = c.real_job = MagicMock()
    c.job = MagicMock()  # the What-if's own prediction: not under test here

    def run(p99: float) -> Any:
        c.on_events([ServingStarted({"spec": "poisson:50"}, {"max_batch": 4}, {}, 0.0, False)])
        c.on_events([ServingSummary({
            "latency_ms": {"p50": p99 / 2, "p99": p99, "count": 90}, "requests": {
                "rejected": 0, "timed_out": 0}, "throughput": {"requests_per_s": 50.0},
            "batch_size": {"mean": 1.2}, "queue_depth": {"max": 3},
        })])  # fmt: skip
        work = real_job.submit.call_args.args[0]
        return work()

    first = run(10.0)
    assert first.repeats == 1 and "run the same load again" in first.text()
    assert first.calibration_contention == quiet
    second = run(12.0)
    assert second.repeats == 2 and second.repeat_spread == pytest.approx(2 / 11)
    assert "the real runs' own spread of 18% (2 runs of this row)" in second.text()
