"""The Traffic room's controller against spec'd doubles of its view and the desk (beside
the whole-window load-run test in test_app_live.py): a load run and a calibration are jobs
on the loaded model through the one runner; Stop load is their Cancel; a failure comes back
in one line and frees the dock; a calibration's result feeds the What-if."""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

import pytest

pytest.importorskip("PySide6")

from app.desk import Desk
from app.traffic.controller import CALIBRATE_BATCH, TrafficController
from app.traffic.port import TrafficViewPort
from engine.events import RunEnded, ServingStarted, ServingSummary
from engine.run.serving_jobs import CalibrateRequest, LoadRunRequest
from engine.serve.batching import BatchPolicy

REQUEST = LoadRunRequest("poisson:50", BatchPolicy(max_batch=4).to_json(), duration_s=2.0)


def _controller() -> tuple[TrafficController, Any, Any, Any]:
    """The controller, its view, its desk and the desk's job runner."""
    view = MagicMock(spec=TrafficViewPort)
    view.calibrate_sizes.return_value = (8, 2)  # max batch, instances
    view.cache_settings.return_value = (0, 0.0)
    view.slo_ms.return_value = None
    desk = MagicMock(spec=Desk)
    desk.plot_origin_ns.return_value = 0
    return TrafficController(desk, view), view, desk, desk.jobs


def _started(
    jobs: Any, concern: str, last: bool = False
) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    calls = [c for c in jobs.start.call_args_list if c.args[0] == concern]
    call = calls[-1] if last else calls[0]
    return call.args[1], call.args[2:], call.kwargs


def test_a_load_run_is_a_job_and_stop_load_is_its_cancel(qapp: Any) -> None:
    c, view, desk, jobs = _controller()
    c.run_load(REQUEST)
    request, _callbacks, kwargs = _started(jobs, "load")
    assert request is REQUEST
    view.set_running.assert_called_with(True)
    c.on_events([ServingStarted({"spec": "poisson:50"}, {"max_batch": 4}, {}, 0.0, False)])
    assert c.serving
    c.stop_load()
    jobs.cancel.assert_any_call("load")
    c.on_events([RunEnded("cancelled", "stopped by the user")])  # what it served is kept
    assert not c.serving
    view.set_running.assert_called_with(False)
    kwargs["on_cancelled"]()  # the job's end after its run's: nothing more to undo
    view.set_running.assert_called_with(False)
    # the runner hears a job's end before the run's last events in the same batch: a job
    # that served leaves the ending to its run (or its summary would be dropped)
    c.run_load(REQUEST)
    _request, (on_done, _on_failed), _kwargs = _started(jobs, "load", last=True)
    c.on_events([ServingStarted({"spec": "poisson:50"}, {"max_batch": 4}, {}, 0.0, False)])
    on_done({"requests": {}})
    assert c.serving
    view.set_running.assert_called_with(True)
    desk.notify.assert_not_called()


def test_a_failed_load_run_says_why_in_one_line_and_frees_the_dock(qapp: Any) -> None:
    c, view, desk, jobs = _controller()
    c.run_load(REQUEST)
    _request, (_on_done, on_failed), _kwargs = _started(jobs, "load")
    on_failed("the engine host died; the load run ended with it")
    desk.notify.assert_called_once_with(
        "error",
        "load run failed: the engine host died; the load run ended with it.",
        key="error:load run",
    )
    view.set_running.assert_called_with(False)


def test_a_bad_traffic_spec_starts_nothing(qapp: Any) -> None:
    c, _view, desk, jobs = _controller()
    c.run_load(LoadRunRequest("poisson:-3", {"max_batch": 1}))
    jobs.start.assert_not_called()
    assert desk.notify.call_args.args[1].startswith("load run failed: ")


def test_a_calibration_is_a_job_whose_result_feeds_the_what_if(qapp: Any) -> None:
    c, view, desk, jobs = _controller()
    c.calibrate()
    request, (on_done, on_failed), kwargs = _started(jobs, "calibrate")
    assert request == CalibrateRequest(max(CALIBRATE_BATCH, 8), 2, remeasure=False)
    view.set_calibrating.assert_called_with(True)  # its progress and Cancel; no Run load
    on_done({"sizes": "not a calibration"})  # unreadable: said, nothing predicted
    assert c.service is None and "unreadable" in view.set_what_if_text.call_args.args[0]
    c.calibrate()
    _request, (_on_done, on_failed), kwargs = _started(jobs, "calibrate")
    on_failed("a load run or calibration is still going: stop it first")
    assert "calibration failed: a load run" in view.set_what_if_text.call_args.args[0]
    assert desk.notify.call_args.kwargs["key"] == "error:calibration"
    view.set_calibrate_enabled.assert_called_with(True)
    kwargs["on_cancelled"]()
    assert "stopped" in view.set_what_if_text.call_args.args[0]
    # what the calibration says on the way reaches the window: a warning its banner
    from engine.events import Notice, Progress

    moved = "calibration: the engine's speed moved +21% while it was timed"
    desk.notify.reset_mock()
    kwargs["on_events"]([Progress("calibrate", 1, 4, "timing"), Notice("warning", moved)])
    desk.notify.assert_called_once_with("warning", moved, key=f"run:{moved}")


def test_a_calibration_shows_its_time_left_and_cancel_stops_it(qapp: Any) -> None:
    """4-5 minutes with no progress, no estimate and no Cancel: now its progress (with the
    time left) is on the dock's bar, Cancel asks the job to stop, and a stopped one says
    nothing of it was kept."""
    from engine.events import Progress

    c, view, _desk, jobs = _controller()
    c.calibrate()
    _request, _callbacks, kwargs = _started(jobs, "calibrate")
    said = "timing batches of 1-32 shuffled: batch 16, 3 of 9 timed; about 25 s left"
    kwargs["on_events"]([Progress("calibrate", 12.0, 37.0, said)])
    view.show_progress.assert_called_with(12.0, 37.0, said)
    # a job on the loaded model streams on the host's own stream, as a run does
    c.on_events([Progress("calibrate", 14.0, 38.0, "about 24 s left")])
    view.show_progress.assert_called_with(14.0, 38.0, "about 24 s left")
    c.cancel_calibration()
    jobs.cancel.assert_called_with("calibrate")
    view.set_cancel_enabled.assert_called_with(False)
    kwargs["on_cancelled"]()
    view.set_calibrating.assert_called_with(False)
    assert "nothing of it was kept" in view.set_what_if_text.call_args.args[0]
    view.show_progress.reset_mock()
    c.on_events([Progress("calibrate", 15.0, 38.0, "late")])  # ended: not shown
    view.show_progress.assert_not_called()


def test_a_load_runs_p99_over_the_slo_leaves_one_marker_and_one_warning(qapp: Any) -> None:
    """The SLO is drawn on the live plot while a load run goes on; a rolling p99 above it
    is marked there and said once per crossing; the run's end takes the line away."""
    c, view, desk, _jobs = _controller()
    view.slo_ms.return_value = 5.0
    desk.plot_stats.return_value = {"p99": 9.0}
    c.check_slo()  # no load run: the timing loop's samples are not what the SLO is about
    desk.mark_plot.assert_not_called()
    c.on_events([ServingStarted({"spec": "poisson:50"}, {"max_batch": 4}, {}, 0.0, False)])
    desk.set_slo.assert_called_with(5.0)
    c.check_slo()
    c.check_slo()
    desk.mark_plot.assert_called_once()
    assert desk.mark_plot.call_args.args[1] == "p99 > SLO 5 ms"
    warned = "p99 9.0 ms crossed the SLO of 5 ms"
    desk.notify.assert_called_once_with("warning", warned, key=f"run:{warned}")
    c.on_events([RunEnded("ok")])
    desk.set_slo.assert_called_with(None)


def test_an_answer_shows_its_flags_and_the_max_rate_read_off_its_curve(qapp: Any) -> None:
    c, view, _desk, _jobs = _controller()
    view.traffic_spec.return_value = "poisson:3"
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
    view.set_what_if_flags.assert_called_with([past])
    text = view.set_what_if_text.call_args.args[0]
    assert "max rate under the SLO 1.43/s" in text and "calibrated quiet" in text


def test_a_real_run_is_held_against_the_spread_of_its_rows_earlier_runs(qapp: Any) -> None:
    """The second real run of a row: its check gets the first as the real system's own
    repeat, and the calibration's contention beside the run's."""
    import numpy as np

    from engine.measure.contention import Contention
    from engine.serve.sim.service import ServiceModel

    c, _view, _desk, _jobs = _controller()
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
