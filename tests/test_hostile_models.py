"""Hostile model files: each refused in one line before it is read or run (issue 53).

A path that is not a regular file (a device such as /dev/zero, a FIFO, a socket), a file
larger than the machine's memory, a rank-1000 input, a NUL byte in an external-data name,
a ConstantOfShape whose shape the file fixes at 2^40 elements."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from engine import files
from engine.errors import InputError, ModelError
from engine.model.info import load_model
from engine.model.inputs import plan_inputs

ROOT = Path(__file__).resolve().parents[1]


def _save(graph: onnx.GraphProto, path: Path) -> Path:
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return path


def _identity(path: Path, rank: int = 2) -> Path:
    g = h.make_graph(
        [h.make_node("Identity", ["x"], ["y"])], "g",
        [h.make_tensor_value_info("x", T.FLOAT, [1] * rank)],
        [h.make_tensor_value_info("y", T.FLOAT, None)],
    )  # fmt: skip
    return _save(g, path)


def _in_time(fn: Callable[[], object], seconds: float = 20.0) -> BaseException | None:
    """Run `fn` on a thread; the exception it raised (it must end in time: a FIFO that is
    opened for reading blocks forever)."""
    caught: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as exc:
            caught.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), "the model path was read (blocked) instead of refused"
    return caught[0] if caught else None


def test_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "model.onnx"
    os.mkfifo(fifo)
    exc = _in_time(lambda: load_model(fifo))
    assert isinstance(exc, ModelError)
    assert str(exc) == f"{fifo}: is a FIFO, not a model file: give a regular file"


def test_a_fifo_named_as_a_pytorch_model_is_refused(tmp_path: Path) -> None:
    from engine.backends.pytorch.load import load_torch

    fifo = tmp_path / "model.pt2"
    os.mkfifo(fifo)
    exc = _in_time(lambda: load_torch(fifo))
    assert isinstance(exc, ModelError) and "is a FIFO, not a model file" in str(exc)


def test_a_device_is_refused_before_a_byte_is_read() -> None:
    exc = _in_time(lambda: load_model("/dev/zero"))
    assert isinstance(exc, ModelError) and "is a device, not a model file" in str(exc)


def test_a_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.onnx"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    try:
        with pytest.raises(ModelError, match="is a socket, not a model file"):
            load_model(path)
    finally:
        sock.close()


def test_a_symlink_to_a_device_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "m.onnx"
    link.symlink_to("/dev/zero")
    with pytest.raises(ModelError, match="is a device"):
        load_model(link)


def test_a_model_larger_than_memory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _identity(tmp_path / "m.onnx")
    load_model(model)  # fits
    monkeypatch.setattr(files, "machine_memory_bytes", lambda: 16)  # a machine of 16 bytes
    with pytest.raises(ModelError, match=r"more than this machine's memory \(0.0 GiB\)"):
        load_model(model)


def test_external_data_larger_than_memory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    w = onnx.numpy_helper.from_array(np.ones(1, np.float32), "w")  # raw data: saved apart
    g = h.make_graph(
        [h.make_node("Add", ["x", "w"], ["y"])], "g",
        [h.make_tensor_value_info("x", T.FLOAT, [1])],
        [h.make_tensor_value_info("y", T.FLOAT, [1])], initializer=[w],
    )  # fmt: skip
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="w.bin",
              size_threshold=0)  # fmt: skip
    with (tmp_path / "w.bin").open("ab") as fh:
        fh.truncate(1 << 20)  # sparse: a MiB of weights on disk
    assert (tmp_path / "w.bin").stat().st_size == 1 << 20
    size = path.stat().st_size
    load_model(path)  # fits
    monkeypatch.setattr(files, "machine_memory_bytes", lambda: size + 1000)
    with pytest.raises(ModelError, match="more than this machine's memory"):
        load_model(path)


def _with_external_weight(tmp_path: Path, location: str) -> Path:
    """A model adding a weight kept in an external-data file named `location`."""
    w = h.make_tensor("w", T.FLOAT, [1], [1.0])
    w.data_location = T.EXTERNAL
    del w.float_data[:]
    e = w.external_data.add()
    e.key, e.value = "location", location
    g = h.make_graph(
        [h.make_node("Add", ["x", "w"], ["y"])], "g",
        [h.make_tensor_value_info("x", T.FLOAT, [1])],
        [h.make_tensor_value_info("y", T.FLOAT, [1])], initializer=[w],
    )  # fmt: skip
    return _save(g, tmp_path / "m.onnx")


def test_external_data_that_is_a_fifo_is_refused(tmp_path: Path) -> None:
    path = _with_external_weight(tmp_path, "w.bin")
    os.mkfifo(tmp_path / "w.bin")
    exc = _in_time(lambda: load_model(path))
    assert isinstance(exc, ModelError) and "is a FIFO" in str(exc)


def test_a_nul_byte_in_an_external_data_name_is_one_line(tmp_path: Path) -> None:
    path = _with_external_weight(tmp_path, "we\x00ights.bin")
    with pytest.raises(ModelError, match="has a NUL byte in its name"):
        load_model(path)


def test_a_rank_1000_input_is_one_line(tmp_path: Path) -> None:
    _, info = load_model(_identity(tmp_path / "m.onnx", rank=1000))
    with pytest.raises(InputError, match="input 'x' has rank 1000: at most 64 axes"):
        plan_inputs(info, 1)


def _constant_of_shape(path: Path, elements: list[int], consumer: bool = True) -> Path:
    nodes = [
        h.make_node("Constant", [], ["s"],
                    value=h.make_tensor("v", T.INT64, [len(elements)], elements)),
        h.make_node("ConstantOfShape", ["s"], ["c"]),
    ]  # fmt: skip
    nodes.append(h.make_node("Add", ["x", "c"], ["y"]))
    g = h.make_graph(
        nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1])],
        [h.make_tensor_value_info("y", T.FLOAT, None)],
    )  # fmt: skip
    return _save(g, path)


def test_a_constant_of_shape_of_2_to_the_40_is_refused_before_shape_inference(
    tmp_path: Path,
) -> None:
    """Before: ONNX's shape inference with data propagation built the 2^40 tensor (killed
    for memory), and ONNX Runtime after it; now refused from the file's constants."""
    from engine.model.inputs import generate_inputs
    from engine.model.memory_need import inferred_at

    model, info = load_model(_constant_of_shape(tmp_path / "m.onnx", [2**40]))
    plan = plan_inputs(info, 1)
    for step in (lambda: generate_inputs(model, info, plan, 0),
                 lambda: inferred_at(model, plan.shapes)):  # fmt: skip
        exc = _in_time(step, 60)
        assert isinstance(exc, ModelError), exc
        assert "ConstantOfShape #1 (a shape the file fixes" in str(exc)
        assert "would take 4.4 TB" in str(exc)


def test_a_small_constant_of_shape_still_runs(tmp_path: Path) -> None:
    from engine.model.inputs import generate_inputs

    model, info = load_model(_constant_of_shape(tmp_path / "m.onnx", [4]))
    assert set(generate_inputs(model, info, plan_inputs(info, 1), 0)) == {"x"}


@pytest.mark.parametrize("command", ["bench", "memory", "graph"])
def test_dev_zero_as_the_model_is_one_line(command: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "app.entry", command, "/dev/zero"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "opscope: error: /dev/zero: is a device, not a model file: give a regular file"
    )
    assert "Traceback" not in proc.stderr
