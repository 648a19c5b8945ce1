"""Checks that every model in tests.model_zoo behaves as intended in onnxruntime (CPU)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from google.protobuf.message import DecodeError
from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument, InvalidProtobuf

from tests.model_zoo import UNLOADABLE, ZOO

B = 3  # batch size used for feeds
Feeds = dict[str, np.ndarray]


def _f32(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)


def _session(path: Path) -> ort.InferenceSession:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _int_feeds() -> Feeds:
    ids = np.random.default_rng(0).integers(0, 500, size=(B, 7), dtype=np.int64)
    return {
        "input_ids": ids,
        "attention_mask": np.ones((B, 7), np.int64),
        "token_type_ids": np.zeros((B, 7), np.int32),
    }


# name -> (feeds, expected shape per tensor output; None for non-tensor outputs)
RUNNABLE: dict[str, tuple[Callable[[], Feeds], list[tuple[int, ...] | None]]] = {
    "dims_named": (lambda: {"x": _f32(B, 16)}, [(B, 8)]),
    "dims_unknown": (lambda: {"x": _f32(B, 16)}, [(B, 8)]),
    "dims_minus_one": (lambda: {"x": _f32(B, 16)}, [(B, 8)]),
    "dims_formula": (lambda: {"x": _f32(B, 5), "x_next": _f32(B, 6)}, [(B, 10), (B, 5)]),
    "int_inputs": (_int_feeds, [(B, 32)]),
    "bool_input": (lambda: {"x": _f32(B, 8), "keep": _f32(B, 8) > 0}, [(B, 8)]),
    "stateful_rnn": (lambda: {"X": _f32(5, B, 4), "h0": _f32(1, B, 8)}, [(5, 1, B, 8), (1, B, 8)]),
    "constant_weights": (lambda: {"x": _f32(B, 32)}, [(B, 10)]),
    "qdq_quantized": (lambda: {"x": _f32(B, 16)}, [(B, 8)]),
    "dynamic_quantized": (lambda: {"x": _f32(B, 16)}, [(B, 8)]),
    "contrib_ops": (lambda: {"x": _f32(B, 16)}, [(B, 8)]),
    "sequence_output": (lambda: {"x": _f32(B, 8)}, [None]),
    "map_output": (lambda: {"x": _f32(B, 4)}, [(B,), None]),
    "external_data": (lambda: {"x": _f32(B, 256)}, [(B, 256)]),
    "subgraph_if": (lambda: {"x": _f32(B, 8)}, [(B, 8)]),
    "multi_output": (lambda: {"a": _f32(B, 8), "b": _f32(B, 8)}, [(B, 8), (B, 8), (B,)]),
    "shape_mismatch": (lambda: {"x": _f32(1, 3, 8, 8)}, [(1, 10)]),
    "shape_mismatch_dynamic": (lambda: {"x": _f32(1, 3, 8, 8)}, [(1, 10)]),
}


def _all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    for n in graph.node:
        yield n
        for attr in n.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(attr.g)


def test_zoo_is_partitioned() -> None:
    assert set(RUNNABLE) | UNLOADABLE == set(ZOO)
    assert not set(RUNNABLE) & UNLOADABLE


def test_all_build_into_one_directory(tmp_path: Path) -> None:
    paths = [build(tmp_path) for build in ZOO.values()]
    assert len(set(paths)) == len(paths)
    assert all(p.is_file() and p.suffix == ".onnx" for p in paths)


@pytest.mark.parametrize("name", sorted(RUNNABLE))
def test_runs_with_expected_shapes(name: str, tmp_path: Path) -> None:
    path = ZOO[name](tmp_path)
    assert path == tmp_path / f"{name}.onnx"
    onnx.checker.check_model(str(path), full_check=True)
    model = onnx.load(str(path))
    assert all(n.name for n in _all_nodes(model.graph)), "every node must be named"
    feeds, expected = RUNNABLE[name]
    outputs = _session(path).run(None, feeds())
    assert len(outputs) == len(expected)
    for out, shape in zip(outputs, expected, strict=True):
        if shape is not None:
            assert out.shape == shape


def test_dims_as_reported_by_ort(tmp_path: Path) -> None:
    shape = {n: _session(ZOO[n](tmp_path)).get_inputs()[0].shape for n in ZOO if "dims" in n}
    assert shape["dims_named"] == ["batch", 16]
    assert shape["dims_unknown"] == [None, 16]
    assert shape["dims_minus_one"] == [None, 16]  # ORT maps dim_value -1 to None
    assert shape["dims_formula"] == ["batch", "seq"]
    model = onnx.load(str(tmp_path / "dims_minus_one.onnx"))
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_value == -1
    sess = _session(tmp_path / "dims_formula.onnx")
    assert sess.get_inputs()[1].shape == ["batch", "seq+1"]
    assert sess.get_outputs()[0].shape == ["batch", "2*seq"]


def test_int_inputs_vocab_bound(tmp_path: Path) -> None:
    sess = _session(ZOO["int_inputs"](tmp_path))
    types = [i.type for i in sess.get_inputs()]
    assert types == ["tensor(int64)", "tensor(int64)", "tensor(int32)"]
    model = onnx.load(str(tmp_path / "int_inputs.onnx"))
    inits = {t.name: list(t.dims) for t in model.graph.initializer}
    gathers = [n for n in model.graph.node if n.op_type == "Gather"]
    assert [inits[n.input[0]] for n in gathers] == [[500, 32], [2, 32]]
    feeds = _int_feeds()
    feeds["input_ids"][0, 0] = 500
    with pytest.raises(InvalidArgument, match="indices element out of data bounds"):
        sess.run(None, feeds)


def test_bool_input_masks(tmp_path: Path) -> None:
    x, keep = _f32(B, 8), _f32(B, 8) > 0
    (out,) = _session(ZOO["bool_input"](tmp_path)).run(None, {"x": x, "keep": keep})
    np.testing.assert_array_equal(out, np.where(keep, x, 0))


def test_constant_weights_has_no_initializers(tmp_path: Path) -> None:
    model = onnx.load(str(ZOO["constant_weights"](tmp_path)))
    assert len(model.graph.initializer) == 0
    consts = [n for n in model.graph.node if n.op_type == "Constant"]
    params = sum(int(np.prod(a.t.dims)) for n in consts for a in n.attribute)
    assert params == 32 * 64 + 64 + 64 * 10 + 10


@pytest.mark.parametrize("name", ["qdq_quantized", "dynamic_quantized"])
def test_quantized_close_to_float(name: str, tmp_path: Path) -> None:
    model = onnx.load(str(ZOO[name](tmp_path)))
    ops = {n.op_type for n in model.graph.node}
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    assert inits["fc.weight_quantized"].dtype == np.int8
    x = _f32(B, 16)
    ref = x @ (inits["fc.weight_quantized"].astype(np.float32) * 0.005) + inits["fc.bias"]
    (out,) = _session(tmp_path / f"{name}.onnx").run(None, {"x": x})
    np.testing.assert_allclose(out, ref, atol=0.05)
    if name == "qdq_quantized":
        assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    else:
        assert {"DynamicQuantizeLinear", "MatMulInteger"} <= ops


def test_contrib_ops_domain(tmp_path: Path) -> None:
    model = onnx.load(str(ZOO["contrib_ops"](tmp_path)))
    assert {(o.domain, o.version) for o in model.opset_import} >= {("com.microsoft", 1)}
    ms_ops = {n.op_type for n in model.graph.node if n.domain == "com.microsoft"}
    assert ms_ops == {"FusedMatMul", "Gelu"}


def test_sequence_output_is_list(tmp_path: Path) -> None:
    sess = _session(ZOO["sequence_output"](tmp_path))
    assert sess.get_outputs()[0].type == "seq(tensor(float))"
    (parts,) = sess.run(None, {"x": _f32(B, 8)})
    assert isinstance(parts, list) and [p.shape for p in parts] == [(B, 8), (B, 8)]


def test_map_output_is_list_of_dicts(tmp_path: Path) -> None:
    sess = _session(ZOO["map_output"](tmp_path))
    assert sess.get_outputs()[1].type == "seq(map(int64,tensor(float)))"
    labels, probs = sess.run(None, {"x": _f32(B, 4)})
    assert labels.dtype == np.int64
    assert isinstance(probs, list) and len(probs) == B
    for row, label in zip(probs, labels, strict=True):
        assert isinstance(row, dict) and set(row) == {0, 1, 2}
        assert sum(row.values()) == pytest.approx(1.0, abs=1e-5)
        assert max(row, key=row.__getitem__) == label


def test_external_data_file(tmp_path: Path) -> None:
    path = ZOO["external_data"](tmp_path)
    data = tmp_path / "external_data.onnx.data"
    assert data.stat().st_size == 256 * 256 * 4
    assert path.stat().st_size < 4096
    model = onnx.load(str(path), load_external_data=False)
    assert model.graph.initializer[0].data_location == onnx.TensorProto.EXTERNAL


def test_subgraph_if_takes_both_branches(tmp_path: Path) -> None:
    sess = _session(ZOO["subgraph_if"](tmp_path))
    x = np.abs(_f32(B, 8))
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], 2 * x)
    np.testing.assert_allclose(sess.run(None, {"x": -x})[0], x)


def test_multi_output_types(tmp_path: Path) -> None:
    sess = _session(ZOO["multi_output"](tmp_path))
    assert [o.type for o in sess.get_outputs()] == ["tensor(float)"] * 2 + ["tensor(int64)"]


@pytest.mark.parametrize(
    ("name", "error", "message"),
    [
        ("corrupt", InvalidProtobuf, "Protobuf parsing failed"),
        ("truncated", InvalidProtobuf, "Protobuf parsing failed"),
        ("external_data_missing", Fail, "External data path does not exist"),
        ("unsupported_op", Fail, "com.example:FancyOp.* is not a registered function/op"),
        ("session_fails", Fail, r"Type parameter \(T\) of Optype \(Add\) bound to different types"),
    ],
)
def test_unloadable_fails_at_session_creation(
    name: str, error: type[Exception], message: str, tmp_path: Path
) -> None:
    with pytest.raises(error, match=message):
        _session(ZOO[name](tmp_path))


@pytest.mark.parametrize("name", ["corrupt", "truncated", "external_data_missing"])
def test_unloadable_by_onnx(name: str, tmp_path: Path) -> None:
    path = ZOO[name](tmp_path)
    error = onnx.checker.ValidationError if name == "external_data_missing" else DecodeError
    with pytest.raises(error):
        onnx.load(str(path))
    if name == "external_data_missing":
        onnx.load(str(path), load_external_data=False)  # the graph itself is intact


@pytest.mark.parametrize("name", ["unsupported_op", "session_fails"])
def test_checker_accepts_models_ort_rejects(name: str, tmp_path: Path) -> None:
    onnx.checker.check_model(str(ZOO[name](tmp_path)), full_check=False)


def test_session_fails_caught_by_full_check(tmp_path: Path) -> None:
    with pytest.raises(onnx.shape_inference.InferenceError, match="inconsistent type"):
        onnx.checker.check_model(str(ZOO["session_fails"](tmp_path)), full_check=True)


@pytest.mark.parametrize(
    ("name", "error", "message"),
    [
        ("shape_mismatch", InvalidArgument, "Got invalid dimensions for input: x"),
        ("shape_mismatch_dynamic", Fail, "The input tensor cannot be reshaped"),
    ],
)
def test_batch_4_rejected_at_run(
    name: str, error: type[Exception], message: str, tmp_path: Path
) -> None:
    sess = _session(ZOO[name](tmp_path))
    with pytest.raises(error, match=message):
        sess.run(None, {"x": _f32(4, 3, 8, 8)})
