"""A feed of a model's exact inputs is taken whatever its arrays lead with: the sample axis
comes from the model's signature (a state [2, batch, 8] holds its samples on axis 1, a
scalar rate is shared, fixed-shape inputs are one sample), in the CLI's --inputs, the
window's Inputs (the host, and its header check), and INT8 calibration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from engine.backends.base import PrepareRequest
from engine.backends.ort.backend import OrtPrepared, prepare
from engine.config import RunConfig
from engine.errors import InputError, ModelError
from engine.events import RunStarted
from engine.model.eval_data import check_data_file
from engine.model.info import load_model
from engine.model.sample_axis import count_samples, sample_axes
from engine.model.workload import JobInputs, Workload
from engine.run import host_commands as cmds
from tests.test_cli import opscope


def _save(path: Path, nodes: list[Any], ins: list[Any], outs: list[Any], inits: list[Any]) -> Path:
    model = h.make_model(
        h.make_graph(nodes, path.stem, ins, outs, inits), opset_imports=[h.make_opsetid("", 17)]
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def _f(name: str, shape: list[Any], kind: int = T.FLOAT) -> Any:
    return h.make_tensor_value_info(name, kind, shape)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("axis")
    w = h.make_tensor("W", T.FLOAT, [16, 8], np.full(128, 0.01, np.float32))
    state = _save(root / "state.onnx",  # a GRU-like step: state [2, batch, 8], x [batch, 16]
                  [h.make_node("MatMul", ["x", "W"], ["xw"]),
                   h.make_node("Add", ["state", "xw"], ["new_state"])],
                  [_f("state", [2, "batch", 8]), _f("x", ["batch", 16])],
                  [_f("new_state", [2, "batch", 8])], [w])  # fmt: skip
    voice = _save(root / "voice.onnx",  # unnamed batch dims and a scalar sample rate
                  [h.make_node("Add", ["state", "x"], ["s"]),
                   h.make_node("Cast", ["rate"], ["r"], to=T.FLOAT),
                   h.make_node("Mul", ["s", "r"], ["out"])],
                  [_f("state", [2, None, 128]), _f("x", [None, 128]), _f("rate", [], T.INT64)],
                  [_f("out", [2, None, 128])], [])  # fmt: skip
    fixed = _save(root / "fixed.onnx",  # three fixed-shape inputs
                  [h.make_node("Concat", ["a", "b", "c"], ["o"], axis=0)],
                  [_f("a", [1, 4]), _f("b", [2, 4]), _f("c", [3, 4])],
                  [_f("o", [6, 4])], [])  # fmt: skip
    z = np.zeros
    np.savez(root / "state1.npz", state=z((2, 1, 8), np.float32), x=z((1, 16), np.float32))
    np.savez(root / "state4.npz", state=z((2, 4, 8), np.float32), x=z((4, 16), np.float32))
    np.savez(root / "state_bad.npz", state=z((2, 3, 8), np.float32), x=z((4, 16), np.float32))
    np.savez(root / "voice.npz", state=z((2, 1, 128), np.float32),
             x=np.ones((1, 128), np.float32), rate=np.array(16000))  # fmt: skip
    np.savez(root / "fixed.npz", a=np.ones((1, 4), np.float32), b=np.ones((2, 4), np.float32),
             c=np.ones((3, 4), np.float32))  # fmt: skip
    return {"root": root, "state": state, "voice": voice, "fixed": fixed}


def test_the_sample_axis_comes_from_the_signature(models: dict[str, Path]) -> None:
    _, state = load_model(models["state"])
    _, voice = load_model(models["voice"])
    _, fixed = load_model(models["fixed"])
    assert sample_axes(state) == {"state": 1, "x": 0}
    assert sample_axes(voice) == {"state": 1, "x": 0, "rate": None}  # a scalar is shared
    assert sample_axes(fixed) == {"a": 0, "b": 0, "c": 0}  # a fixed batch leads
    assert count_samples({"state": (2, 4, 8), "x": (4, 16)}, state, "f.npz")[0] == 4
    assert count_samples({"state": (2, 1, 128), "x": (1, 128), "rate": ()}, voice, "f")[0] == 1
    rows, axes = count_samples({"a": (1, 4), "b": (2, 4), "c": (3, 4)}, fixed, "f.npz")
    assert rows == 1 and axes == {"a": None, "b": None, "c": None}  # the exact feed: one
    assert count_samples({"a": (5, 4), "b": (5, 4), "c": (5, 4)}, fixed, "f")[0] == 5
    with pytest.raises(InputError, match=r"f\.npz: .*'state' 3 along axis 1, 'x' 4 along axis 0"):
        count_samples({"state": (2, 3, 8), "x": (4, 16)}, state, "f.npz")


def _prepared(req: PrepareRequest) -> tuple[OrtPrepared, RunStarted]:
    gen, started = prepare(req), None
    try:
        while True:
            ev = next(gen)
            started = ev if isinstance(ev, RunStarted) else started
    except StopIteration as stop:
        assert started is not None
        return stop.value, started


def test_exact_feeds_run_cut_along_their_axes_and_calibrate(models: dict[str, Path]) -> None:
    root = models["root"]
    given = JobInputs(inputs_npz=str(root / "state4.npz"))
    p, started = _prepared(
        PrepareRequest(Workload(str(models["state"]), RunConfig(batch=2), given))
    )
    assert p.eval_data is not None and p.eval_data.samples == 4
    assert [b["state"].shape for b in p.eval_data.batches] == [(2, 2, 8), (2, 2, 8)]
    assert started.inputs["state"][0] == (2, 2, 8) and started.batch == 2 == p.batch
    p.close()
    given = JobInputs(inputs_npz=str(root / "voice.npz"))
    p, started = _prepared(
        PrepareRequest(Workload(str(models["voice"]), RunConfig(batch=3), given))
    )
    assert started.inputs["state"][0] == (2, 3, 128) and started.inputs["rate"][0] == ()
    p.close()
    cfg = RunConfig(precision="int8-static", min_cosine=0.9)
    # the exact feeds calibrate (no error on their shapes); the model has no node INT8 can
    # quantize, so the build is refused in one line rather than run as FP32 labelled INT8
    with pytest.raises(ModelError, match="INT8 static quantized nothing"):
        both = JobInputs(
            inputs_npz=str(root / "fixed.npz"), calibration_npz=str(root / "fixed.npz")
        )
        _prepared(PrepareRequest(Workload(str(models["fixed"]), cfg, both)))


def test_the_cli_takes_exact_feeds_and_one_line_names_a_true_disagreement(
    models: dict[str, Path],
) -> None:
    root = models["root"]
    proc = opscope("bench", models["fixed"], "--inputs", root / "fixed.npz",
                   "--duration", "0.1", "--warmup", "3", "--no-live")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "a float32[1x4], b float32[2x4], c float32[3x4]" in proc.stdout
    proc = opscope("bench", models["state"], "--inputs", root / "state_bad.npz", "--no-live")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "state_bad.npz: inputs disagree on the number of samples" in line
    assert "'state' 3 along axis 1, 'x' 4 along axis 0" in line


def test_the_windows_inputs_take_exact_feeds(models: dict[str, Path]) -> None:
    from tests.test_host import Host

    root = models["root"]
    _, info = load_model(models["voice"])
    assert check_data_file(root / "voice.npz", info) == 1  # the picker's header check
    _, info = load_model(models["state"])
    with pytest.raises(InputError, match=r"state_bad\.npz: inputs disagree"):
        check_data_file(root / "state_bad.npz", info)
    host = Host()
    try:
        host.send(cmds.Load(str(models["voice"]), inputs_npz=str(root / "voice.npz")))
        started = host.wait_for(lambda e: isinstance(e, RunStarted))
        assert started.inputs["state"][0] == (2, 1, 128)
    finally:
        host.close()
