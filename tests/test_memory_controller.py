"""The Memory room's controller against spec'd doubles of its view and the desk (beside the
whole-window test in test_app_memory.py): Measure is the desk's recipe on its workload with
live timing paused; the report, a failure, a cancel each end the run in one line; another
model clears the last report."""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock, PropertyMock

import pytest

pytest.importorskip("PySide6")

from app.desk import NO_MODEL, Desk
from app.memory.controller import CONCERN, MemoryController
from app.memory.port import MemoryViewPort
from engine.api import JobInputs, MemoryRequest, Notice, Progress, RunConfig, Workload
from engine.model.info import ModelInfo, ValueInfo

WORKLOAD = Workload("cnn.onnx", RunConfig(batch=2), JobInputs(dims={"N": 4}))


def _info(path: str = "/models/cnn.onnx") -> ModelInfo:
    x = ValueInfo("x", "tensor", "float32", ("N", 3, 32, 32))
    return ModelInfo(path, "0" * 64, 1, 8, "test", {"": 17}, (x,), (x,), 1, 0, {}, 0, 0)


def _controller(busy: bool = False) -> tuple[MemoryController, Any, Any]:
    desk, view = MagicMock(spec=Desk), MagicMock(spec=MemoryViewPort)
    type(desk).session_path = PropertyMock(return_value="s.opscope")
    type(desk).generation_shape = PropertyMock(return_value=None)
    desk.jobs.busy.return_value = busy
    desk.run_on_workload.return_value = True
    return MemoryController(desk, view), desk, view


def _asked(desk: Any) -> tuple[str, Any, dict[str, Any]]:
    (concern, make), kwargs = desk.run_on_workload.call_args
    return concern, make, kwargs


def test_measure_runs_the_memory_job_on_the_workload_with_timing_paused(qapp: Any) -> None:
    c, desk, view = _controller()
    view.measure_requested.connect.assert_called_once_with(c.measure)
    c.measure()
    concern, make, kwargs = _asked(desk)
    assert concern == CONCERN and kwargs["pause"] == "paused: measuring memory"
    view.set_running.assert_called_with(True)
    view.set_status.assert_called_with("measuring: live timing is paused")
    req = make(WORKLOAD)
    assert req == MemoryRequest(WORKLOAD, session="s.opscope")  # an ONNX model: no lengths
    kwargs["on_events"]([Progress("memory", 1, 3, "weights"), Progress("load", 0, 1, "x")])
    view.set_status.assert_called_with("measuring: weights")
    kwargs["on_events"]([Notice("warning", "INT8 variant from the cache")])
    view.set_status.assert_called_with("INT8 variant from the cache")
    report = {"provider_used": "CPUExecutionProvider"}
    kwargs["on_done"](report)
    view.set_report.assert_called_with(report)
    view.set_running.assert_called_with(False)
    view.set_status.assert_called_with(
        "measured on CPUExecutionProvider, resident memory in a process of its own; the "
        "report is in the session"
    )


def test_a_failure_a_cancel_and_no_model_each_end_the_run_in_one_line(qapp: Any) -> None:
    c, desk, view = _controller()
    c.measure()
    _, _, kwargs = _asked(desk)
    kwargs["on_failed"]("the probe crashed")
    view.set_running.assert_called_with(False)
    view.set_status.assert_called_with("memory failed: the probe crashed")
    kwargs["on_cancelled"]()
    view.set_status.assert_called_with("memory cancelled")
    kwargs["on_failed"](NO_MODEL)  # the desk's word when no model runs
    view.set_status.assert_called_with("load a model first")
    view.set_report.assert_not_called()  # the last report stays
    view.cancel_requested.connect.call_args.args[0]()  # Cancel
    desk.jobs.cancel.assert_called_once_with(CONCERN)


def test_measure_while_measuring_starts_nothing(qapp: Any) -> None:
    c, desk, view = _controller(busy=True)
    c.measure()
    desk.run_on_workload.assert_not_called()
    view.set_status.assert_called_once_with("measuring already")


def test_another_model_clears_the_last_report(qapp: Any) -> None:
    c, desk, view = _controller()
    desk.model_loaded.connect.assert_called_once_with(c.model_loaded)
    c.model_loaded(_info())
    view.set_report.assert_called_once_with(None)
    view.set_status.assert_called_once_with("cnn.onnx: Measure for its memory at the shapes shown")
    c.model_loaded(_info())  # timing resumed re-announces the same model: all stays
    assert view.set_report.call_count == 1 and view.set_status.call_count == 1
    desk.jobs.busy.return_value = True  # measuring: its report comes
    c.model_loaded(_info("/models/other.onnx"))
    assert view.set_report.call_count == 1


def test_a_report_for_other_shapes_is_marked_stale_and_fresh_when_they_come_back(
    qapp: Any,
) -> None:
    """Measured at sequence 512, the user goes back to 128: the report is marked stale,
    naming what moved; back at 512 it is fresh again; another precision is stale too."""
    c, desk, view = _controller()
    ids = ValueInfo("input_ids", "tensor", "int64", ("batch", "sequence"))
    info = ModelInfo("/m/enc.onnx", "0" * 64, 1, 8, "t", {"": 17}, (ids,), (ids,), 1, 0, {}, 0, 0)
    type(desk).model_info = PropertyMock(return_value=info)
    at_512 = Workload("/m/enc.onnx", RunConfig(), JobInputs(dims={"sequence": 512}))
    desk.workload_changed.connect.assert_called_once_with(c.workload_changed)
    c.measure()
    _, make, kwargs = _asked(desk)
    make(at_512)
    type(desk).workload = PropertyMock(return_value=at_512)
    kwargs["on_done"]({"provider_used": "CPUExecutionProvider"})
    view.set_stale.assert_called_with(None)  # measured on what runs now: fresh
    c.workload_changed(Workload("/m/enc.onnx", RunConfig(), JobInputs()))  # the default
    view.set_stale.assert_called_with("stale: measured for sequence 512 -> 128; Measure again")
    c.workload_changed(at_512)
    view.set_stale.assert_called_with(None)
    c.workload_changed(at_512.with_config(RunConfig(precision="fp16")))
    view.set_stale.assert_called_with("stale: measured for precision fp32 -> fp16; Measure again")


def test_a_report_measured_while_the_workload_moved_is_stale_at_once(qapp: Any) -> None:
    c, desk, view = _controller()
    type(desk).model_info = PropertyMock(return_value=None)
    c.measure()
    _, make, kwargs = _asked(desk)
    make(Workload("/m/enc.onnx", RunConfig(), JobInputs(dims={"sequence": 512})))
    type(desk).workload = PropertyMock(return_value=Workload("/m/enc.onnx", RunConfig()))
    kwargs["on_done"]({"provider_used": "CPUExecutionProvider"})
    view.set_stale.assert_called_with("stale: measured for sequence 512 -> -; Measure again")
