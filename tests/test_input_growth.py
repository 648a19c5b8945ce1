"""Generated inputs the model rejects at run time (#16): an audio model whose first Conv
frames 100 samples cannot run the default 16; larger sizes are tried for the dims the user
did not set, and the size that ran is said. The user's own shapes are never changed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine.model.info import load_model
from engine.model.input_growth import DIM_LIMIT, _candidates
from engine.model.inputs import OTHER_DEFAULT, plan_inputs
from tests.recorded_sessions import opscope

WINDOW = 100  # samples the Conv frames at once: more than the default 16


def _save(graph: onnx.GraphProto, path: Path) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def audio(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """audio [batch, samples] -> Unsqueeze -> Conv(kernel WINDOW): needs samples >= 100."""
    w = np.random.default_rng(0).standard_normal((4, 1, WINDOW)).astype(np.float32) * 0.1
    graph = helper.make_graph(
        [
            helper.make_node("Unsqueeze", ["audio", "axes"], ["x"], name="unsqueeze"),
            helper.make_node("Conv", ["x", "w"], ["y"], name="frames", kernel_shape=[WINDOW]),
        ],
        "audio_window",
        [helper.make_tensor_value_info("audio", TensorProto.FLOAT, ["batch", "samples"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4, None])],
        initializer=[
            numpy_helper.from_array(w, "w"),
            numpy_helper.from_array(np.array([1], np.int64), "axes"),
        ],
    )
    return _save(graph, tmp_path_factory.mktemp("growth") / "audio.onnx")


def _errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("opscope: error")]


def test_a_too_short_default_grows_until_the_model_runs(audio: Path) -> None:
    """FP32 and INT8 (whose search ran the model first: it was a traceback); static INT8:
    dynamic INT8 has nothing to quantize in a Conv-only model (refused in one line)."""
    for precision in ("fp32", "int8-static"):
        proc = opscope("bench", audio, "--precision", precision, "--duration", "0.1",
                       "--warmup", "1", "--warmup-s", "0", "--no-live")  # fmt: skip
        said = proc.stdout + proc.stderr
        assert proc.returncode == 0 and "Traceback" not in said, said
        assert "generated inputs grown to samples=128" in said, said
        assert "samples=32, samples=64 failed too" in said and "--shape audio=1x128" in said
        assert "audio float32[1x128]" in said


def test_a_size_the_user_set_is_never_changed(audio: Path) -> None:
    proc = opscope("bench", audio, "--shape", "audio=1x16", "--duration", "0.1", "--no-live")
    (error,) = _errors(proc.stderr)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "the model rejected inputs audio float32[1x16]" in error and "grown" not in error


def test_a_model_no_size_fits_fails_in_one_line(tmp_path: Path) -> None:
    """A Reshape to 7 elements: no doubling of 16 reaches it; bounded, then one line."""
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"], name="seven")],
        "seven",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "n"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [7])],
        initializer=[numpy_helper.from_array(np.array([7], np.int64), "shape")],
    )
    model = _save(graph, tmp_path / "seven.onnx")
    proc = opscope("bench", model, "--duration", "0.1", "--no-live")
    (error,) = _errors(proc.stderr)
    assert proc.returncode == 2 and "larger sizes for the dims you did not set failed too" in error


def test_plans_grow_only_the_dims_the_user_did_not_set(audio: Path) -> None:
    info = load_model(audio)[1]
    plan = plan_inputs(info, 2)
    assert plan.defaulted == {"samples": OTHER_DEFAULT} and plan.shapes["audio"] == (2, 16)
    grown = plan_inputs(info, 2, sizes={"samples": 256})
    assert grown.shapes["audio"] == (2, 256) and "too small" in grown.notes[0]
    pinned = plan_inputs(info, 2, {"audio": (2, 8)}, sizes={"samples": 256})
    assert pinned.shapes["audio"] == (2, 8) and pinned.defaulted == {}
    steps = list(_candidates({"a": 16, "b": 3}))
    assert steps[:2] == [{"a": 32}, {"a": 64}] and steps[-1]["a"] == DIM_LIMIT
    assert all(max(s.values()) <= DIM_LIMIT for s in steps)
