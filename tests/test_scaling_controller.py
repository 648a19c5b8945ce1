"""The Scaling room's controller against spec'd doubles of its view and the desk (beside the
whole-window sweeps in test_app_live.py and test_app_llm.py): a model's dims to vary (a
generating model's prompt first, at lengths that fit its context with the new tokens it
runs), a sweep or a prompt sweep as the desk's recipe on its workload with live timing
paused, its points drawn as they come, and its end in one line."""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock, PropertyMock

import pytest

pytest.importorskip("PySide6")

from app.desk import NO_MODEL, Desk
from app.scaling.controller import CONCERN, POINT_S, PROMPT_DIM, ScalingController
from app.scaling.port import ScalingViewPort
from engine.api import (
    GenerateRequest,
    JobInputs,
    Notice,
    Progress,
    PromptPoint,
    PromptSweep,
    PromptSweepRequest,
    RunConfig,
    SweepPoint,
    SweepRequest,
    SweepStored,
    Workload,
    sweep_result_of,
)
from engine.model.info import ModelInfo, ValueInfo
from tests.conftest import DEMO_LLM

CONFIG = RunConfig(batch=2)
WORKLOAD = Workload("t.onnx", CONFIG, JobInputs(dims={"sequence": 64}, inputs_npz="x.npz"))


def _info(*inputs: ValueInfo, path: str = "/models/t.onnx") -> ModelInfo:
    return ModelInfo(path, "0" * 64, 1, 8, "test", {"": 17}, inputs, inputs, 1, 0, {}, 0, 0)


def _controller(
    workload: Workload | None = WORKLOAD,
    shape: tuple[int, int] | None = None,
    dim: str = "sequence",
    values: str = "16,32",
) -> tuple[ScalingController, Any, Any]:
    desk, view = MagicMock(spec=Desk), MagicMock(spec=ScalingViewPort)
    type(desk).workload = PropertyMock(return_value=workload)
    type(desk).generation_shape = PropertyMock(return_value=shape)
    type(desk).session_path = PropertyMock(return_value="s.opscope")
    desk.jobs.busy.return_value = False
    desk.run_on_workload.return_value = True
    view.dim_text.return_value = dim
    view.values_text.return_value = values
    return ScalingController(desk, view), desk, view


def _asked(desk: Any) -> tuple[str, Any, dict[str, Any]]:
    (concern, make), kwargs = desk.run_on_workload.call_args
    return concern, make, kwargs


def test_a_models_dims_batch_last_and_the_first_hint_once(qapp: Any) -> None:
    c, desk, view = _controller()
    desk.model_loaded.connect.assert_called_once_with(c.model_loaded)
    ids = ValueInfo("ids", "tensor", "int64", ("batch", "sequence"))
    mask = ValueInfo("mask", "tensor", "int64", ("batch", "heads", 8))
    c.model_loaded(_info(ids, mask))
    view.set_dims.assert_called_once_with(["heads", "sequence", "batch"])
    view.set_values.assert_not_called()
    view.set_status.assert_called_once_with("t.onnx: pick a dim and sizes, then Run sweep")
    c.model_loaded(_info(ValueInfo("x", "tensor", "float32", (1, 3))))  # no symbolic dim
    view.set_dims.assert_called_with(["x"])  # its inputs' names
    assert view.set_status.call_count == 1  # the first hint only


def test_a_generating_model_offers_its_prompt_first_within_its_context(qapp: Any) -> None:
    ids = ValueInfo("input_ids", "tensor", "int64", ("batch_size", "sequence_length"))
    c, _desk, view = _controller(Workload(str(DEMO_LLM), RunConfig(engine="genai")))
    c.model_loaded(_info(ids, path=str(DEMO_LLM)))
    view.set_dims.assert_called_once_with([PROMPT_DIM, "batch_size", "sequence_length"])
    view.set_values.assert_called_once_with("128,256,512,1024")  # 2048 context, 32 new tokens
    c, _desk, view = _controller(Workload(str(DEMO_LLM)), shape=(16, 1536))  # as it runs
    c.model_loaded(_info(ids, path=str(DEMO_LLM)))
    view.set_values.assert_called_once_with("64,128,256,512")


def test_a_sweep_runs_on_the_workload_and_draws_its_points(qapp: Any) -> None:
    c, desk, view = _controller()
    view.run_requested.connect.assert_called_once_with(c.run)
    c.run()
    concern, make, kwargs = _asked(desk)
    assert concern == CONCERN and kwargs["pause"] == "paused: scaling sweep"
    view.set_running.assert_called_with(True)
    view.set_status.assert_called_with("sweeping: live timing is paused")
    assert make(WORKLOAD) == SweepRequest.of(WORKLOAD, "sequence", ["16", "32"], "s.opscope")
    points = [SweepPoint(16, 16, 1.0, 30, {"MatMul": 0.5}, p50_rel_err=0.01),
              SweepPoint(32, 32, 2.1, 30, p50_rel_err=0.01)]  # fmt: skip
    kwargs["on_events"]([Progress("sweep", 0, 2, "sequence=16")])
    view.set_status.assert_called_with("sweeping sequence=16 (1 of 2)")
    kwargs["on_events"]([points[0], Progress("sweep", 1, 2, "sequence=32")])
    view.set_sweep.assert_called_with(sweep_result_of("sequence", points[:1]).to_json())
    view.set_status.assert_called_with("point 16: p50 1.000 ms (n=30) · now sequence=32 (2 of 2)")
    kwargs["on_events"]([Notice("warning", "busy machine")])
    view.set_status.assert_called_with("point 16: p50 1.000 ms (n=30) · busy machine")
    kwargs["on_events"]([points[1]])
    result = sweep_result_of("sequence", points)
    kwargs["on_done"](result)
    view.set_sweep.assert_called_with(result.to_json())
    view.set_running.assert_called_with(False)
    said = view.set_status.call_args.args[0]
    # k = log2(2.1), its error bar from the two p50s' spread: sqrt(2) * 0.01 / ln 2
    assert said.startswith("total ~ sequence^1.07 ± 0.02 (fitted over the upper half")
    assert said.endswith("; the sweep is in the session")


def test_a_cancelled_sweep_says_whether_its_points_are_kept(qapp: Any) -> None:
    c, desk, view = _controller()
    c.run()
    _, _, kwargs = _asked(desk)
    kwargs["on_cancelled"]()
    view.set_status.assert_called_with("sweep cancelled")
    c.run()
    _, _, kwargs = _asked(desk)
    kwargs["on_events"]([SweepPoint(16, 16, 1.0, 30), SweepStored(1, True, 1, 2)])
    kwargs["on_cancelled"]()
    view.set_running.assert_called_with(False)
    view.set_status.assert_called_with("sweep cancelled: the points done are in the session")
    kwargs["on_failed"]("the engine host died")
    view.set_status.assert_called_with("sweep failed: the engine host died")
    kwargs["on_failed"](NO_MODEL)
    view.set_status.assert_called_with("load a model first")
    view.cancel_requested.connect.assert_called_once_with(c.cancel)
    c.cancel()
    desk.jobs.cancel.assert_called_once_with(CONCERN)


def test_what_cannot_start_says_why_and_starts_nothing(qapp: Any) -> None:
    c, desk, view = _controller(values="16")
    c.run()
    assert "two values or more" in view.set_status.call_args.args[0]
    c, desk, view = _controller(dim=PROMPT_DIM, values="16,x")
    c.run()
    view.set_status.assert_called_with(
        "prompt lengths: whole numbers separated by commas, got '16,x'"
    )
    desk.run_on_workload.assert_not_called()
    c, desk, view = _controller()
    desk.jobs.busy.return_value = True
    c.run()
    view.set_status.assert_called_once_with("a sweep is running")
    desk.run_on_workload.assert_not_called()


def test_a_prompt_sweep_times_whole_generations_at_the_new_tokens_shown(qapp: Any) -> None:
    llm = Workload(str(DEMO_LLM), RunConfig(engine="genai", batch=3), JobInputs(inputs_npz="x"))
    c, desk, view = _controller(llm, shape=(16, 12), dim=PROMPT_DIM, values="16, 64,128")
    c.run()
    _, make, kwargs = _asked(desk)
    generate = GenerateRequest(
        Workload(str(DEMO_LLM), llm.config), new_tokens=12, batch=3, duration_s=3 * POINT_S
    )
    assert make(llm) == PromptSweepRequest(generate, (16, 64, 128), "s.opscope")
    point = PromptPoint(16, 5.0, 1.25, 4)
    kwargs["on_events"]([point])
    view.set_prompt_sweep.assert_called_with([point.to_json()])
    view.set_status.assert_called_with("prompt 16: TTFT p50 5.000 ms, TPOT p50 1.250 ms (n=4)")
    points = [point, PromptPoint(64, 9.0, 1.5, 4), PromptPoint(128, 20.0, 1.75, 4)]
    sweep = PromptSweep(points, (4.0, 0.05, 0.0005), 0.41, 2.5, 1.2)
    kwargs["on_done"](sweep)
    view.set_prompt_sweep.assert_called_with([p.to_json() for p in points], sweep.fit)
    view.set_running.assert_called_with(False)
    view.set_status.assert_called_with(
        f"{sweep.fit_text()}: the quadratic term (attention over the prompt) is 41% of TTFT "
        "at 128 tokens; TPOT +2.500 us per token of context; each length's run is in the "
        "session"
    )


def test_another_model_clears_the_last_ones_sweep_and_names_the_new_one(qapp: Any) -> None:
    """The Scaling dock still named the previous model after another was opened."""
    c, desk, view = _controller()
    ids = ValueInfo("ids", "tensor", "int64", ("batch", "sequence"))
    c.model_loaded(_info(ids))
    c.run()
    _, _, kwargs = _asked(desk)
    kwargs["on_done"](sweep_result_of("sequence", [SweepPoint(16, 16, 1.0, 30),
                                                   SweepPoint(32, 32, 2.0, 30)]))  # fmt: skip
    assert view.set_status.call_args.args[0].startswith("total ~ sequence^1.00")
    c.model_loaded(_info(ids))  # the same model re-announced (timing resumed): all stays
    assert view.set_status.call_args.args[0].startswith("total ~ sequence^1.00")
    view.set_sweep.reset_mock()
    c.model_loaded(_info(ids, path="/models/other.onnx"))
    view.set_sweep.assert_called_once_with({})
    view.set_status.assert_called_with("other.onnx: pick a dim and sizes, then Run sweep")


def test_a_doubtful_exponent_is_named_in_the_status_line(qapp: Any) -> None:
    """Total equal at 128 and 256: the fit is flagged, in words, not just a k."""
    c, desk, view = _controller()
    c.run()
    _, _, kwargs = _asked(desk)
    points = [SweepPoint(n, n, t, 30, p50_rel_err=0.01)
              for n, t in ((64, 1.0), (128, 2.0), (256, 2.0), (512, 4.0))]  # fmt: skip
    kwargs["on_done"](sweep_result_of("sequence", points))
    said = view.set_status.call_args.args[0]
    assert said.startswith("total ~ sequence^1.00 ± 0.02")
    assert said.endswith(". Doubtful (!): total (not monotonic: 2 at 128, 2 at 256)")
