"""The whole run (load, inputs, variant, session, timing, accuracy, profile) on every
real-world model shape in the zoo, in-process through `run_bench`."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from engine.cli.results import RunResult
from engine.config import RunConfig
from engine.errors import InputError, ModelError
from engine.model.workload import Workload
from engine.run.bench import BenchRequest, run_bench
from engine.run.timing import TimingPlan
from tests.model_zoo import RUNNABLE

QUICK = TimingPlan(warmup_runs=2, warmup_s=0.0, min_runs=5, duration_s=0.05)


def _run(path: Path, config: RunConfig | None = None, **kwargs: object) -> RunResult:
    result = RunResult()
    work = Workload(str(path), config or RunConfig())
    for ev in run_bench(BenchRequest(work, timing=QUICK, **kwargs)):  # type: ignore[arg-type]
        result.feed(ev)
    return result


@pytest.mark.parametrize("name", RUNNABLE)
def test_bench_and_profile_every_runnable_model(zoo: dict[str, Path], name: str) -> None:
    r = _run(zoo[name], config=RunConfig(batch=2), profile=True, profile_runs=3)
    assert r.ended is not None and r.ended.status == "ok"
    assert r.timing is not None and r.timing.latency.count >= 5
    assert r.started is not None and r.started.provider_used == "CPUExecutionProvider"
    assert r.profile is not None and r.profile.runs == 3
    assert r.profile.ops, "every model has at least one profiled node"
    data = r.to_json()
    assert data["status"] == "ok" and data["ops"]


def test_variants_of_unusual_models_report_accuracy(zoo: dict[str, Path]) -> None:
    r = _run(zoo["constant_weights"], config=RunConfig(precision="int8-dynamic", batch=2))
    assert r.accuracy is not None
    assert r.accuracy.samples >= 1
    assert math.isfinite(r.accuracy.max_abs_err)
    assert r.accuracy.cosine > 0.9
    assert r.variant is not None and r.variant.details["quantized_nodes"] == 2  # (as Gemm)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("map_output", "INT8 dynamic quantized nothing: this model has no node"),
        ("sequence_output", "INT8 dynamic quantized nothing: this model has no node"),
        ("multi_output", "INT8 dynamic quantized nothing: this model has no node"),
        ("qdq_quantized", "this model is quantized already"),
        ("int_inputs", "INT8 dynamic quantized nothing: this model has no node"),
    ],
)
def test_int8_that_would_quantize_nothing_is_refused(
    zoo: dict[str, Path], name: str, why: str
) -> None:
    """No INT8 that did nothing (#50): the run would be the FP32 model under the INT8 name."""
    with pytest.raises(ModelError, match=why):
        _run(zoo[name], config=RunConfig(precision="int8-dynamic", batch=2))


def test_fixed_batch_model_keeps_its_shape(zoo: dict[str, Path]) -> None:
    r = _run(zoo["shape_mismatch"], config=RunConfig(batch=4))
    assert r.started is not None
    assert r.started.inputs["x"][0] == (1, 3, 8, 8)
    assert r.started.batch == 1  # samples/s counts what was really fed


def test_model_rejecting_inputs_names_input_and_shape(zoo: dict[str, Path]) -> None:
    with pytest.raises(InputError) as err:
        _run(zoo["shape_mismatch_dynamic"], config=RunConfig(batch=4))
    text = str(err.value)
    assert "x float32[4x3x8x8]" in text and "--shape" in text and "--inputs" in text


@pytest.mark.parametrize(
    "name", ["unsupported_op", "session_fails", "corrupt", "external_data_missing"]
)
def test_unloadable_models_raise_model_errors(zoo: dict[str, Path], name: str) -> None:
    with pytest.raises(ModelError):
        _run(zoo[name])
