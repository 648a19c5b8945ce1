"""No INT8 that did nothing (#50, item 3): an INT8 build says how many nodes of each op type
it quantized; one that quantized none is refused with one line saying why (never cached as
a good variant); Constant weights (a PaddleOCR recognizer's MatMuls) are folded into
initializers first, so they get quantized."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine.backends.ort import variants
from engine.backends.ort.constant_weights import fold_constants
from engine.backends.ort.quant_counts import quantized_summary
from engine.backends.ort.variants import build_variant
from engine.errors import ModelError
from engine.events import Notice, VariantReady
from engine.model.info import load_model


def _save(nodes: list[Any], inits: list[Any], x: Any, y: Any, path: Path) -> Path:
    graph = helper.make_graph(nodes, path.stem, [x], [y], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _constant_matmuls(path: Path, n: int = 3) -> Path:
    """n MatMuls whose weights are Constant nodes, as PaddlePaddle exports them."""
    rng = np.random.default_rng(0)
    nodes, x = [], "x"
    for i in range(n):
        w = (rng.standard_normal((32, 32)) / 6).astype(np.float32)
        value = numpy_helper.from_array(w, f"w{i}")
        nodes.append(helper.make_node("Constant", [], [f"w{i}"], value=value, name=f"const{i}"))
        nodes.append(helper.make_node("MatMul", [x, f"w{i}"], [f"y{i}"], name=f"matmul{i}"))
        x = f"y{i}"
    nodes[-1].output[0] = "out"
    xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 32])
    yo = helper.make_tensor_value_info("out", TensorProto.FLOAT, [4, 32])
    return _save(nodes, [], xi, yo, path)


def _matmul_and_gemm(path: Path) -> Path:
    """2 MatMuls with stored weights, 1 MatMul of two activations, 2 Gemms (one with
    stored weights, one whose B is an activation)."""
    rng = np.random.default_rng(1)
    w = [numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), f"w{i}")
         for i in range(3)]  # fmt: skip
    nodes = [
        helper.make_node("MatMul", ["x", "w0"], ["a"], name="mm_a"),
        helper.make_node("MatMul", ["a", "w1"], ["b"], name="mm_b"),
        helper.make_node("MatMul", ["a", "b"], ["c"], name="mm_act"),
        helper.make_node("Gemm", ["c", "w2"], ["d"], name="gemm_w"),
        helper.make_node("Gemm", ["d", "a"], ["out"], name="gemm_act"),
    ]
    xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 16])
    yo = helper.make_tensor_value_info("out", TensorProto.FLOAT, [16, 16])
    return _save(nodes, w, xi, yo, path)


def _convs(path: Path, n: int = 3) -> Path:
    """A Conv-only network (as a detector's backbone): n Conv + Relu."""
    rng = np.random.default_rng(2)
    nodes, inits, x = [], [], "image"
    for i in range(n):
        w = (rng.standard_normal((4, 4 if i else 3, 3, 3)) / 5).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"),
                  numpy_helper.from_array(np.zeros(4, np.float32), f"b{i}")]  # fmt: skip
        nodes += [
            helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], name=f"conv{i}",
                             pads=[1, 1, 1, 1]),
            helper.make_node("Relu", [f"c{i}"], [f"r{i}" if i < n - 1 else "out"],
                             name=f"relu{i}"),
        ]  # fmt: skip
        x = f"r{i}"
    xi = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 16, 16])
    yo = helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 16, 16])
    return _save(nodes, inits, xi, yo, path)


def _events(info: Any, precision: str, *args: Any, **kw: Any) -> list[Any]:
    return list(build_variant(info, precision, *args, **kw))


def _ready(events: list[Any]) -> VariantReady:
    (ready,) = [e for e in events if isinstance(e, VariantReady)]
    return ready


def _run(path: str | Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.asarray(sess.run(None, feeds)[0])


@pytest.fixture
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(folder))
    return folder


def _no_preprocessing(monkeypatch: pytest.MonkeyPatch) -> None:
    """ORT's pre-processing folds Constant nodes itself when it runs; the recognizer's
    failed (symbolic shape inference), which left them as nodes."""
    import onnxruntime.quantization.shape_inference as si

    def fail(*_: Any, **__: Any) -> None:
        raise RuntimeError("symbolic shape inference failed")

    monkeypatch.setattr(si, "quant_pre_process", fail)


def test_fold_constants_moves_tensor_constants_into_initializers(tmp_path: Path) -> None:
    model = onnx.load(str(_constant_matmuls(tmp_path / "m.onnx", 2)))
    scalar = helper.make_node("Constant", [], ["s"], value_float=2.0)
    ints = helper.make_node("Constant", [], ["shape"], value_ints=[4, 32])
    strings = helper.make_node("Constant", [], ["names"], value_strings=[b"a"])
    model.graph.node.extend([scalar, ints, strings])
    assert fold_constants(model) == 4
    assert [n.op_type for n in model.graph.node] == ["MatMul", "MatMul", "Constant"]
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert set(inits) == {"w0", "w1", "s", "shape"}
    assert inits["s"].dtype == np.float32 and float(inits["s"]) == 2.0
    assert inits["shape"].tolist() == [4, 32] and inits["shape"].dtype == np.int64
    assert fold_constants(model) == 0


def test_constant_weights_are_folded_and_quantized(
    tmp_path: Path, own_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_preprocessing(monkeypatch)
    path = _constant_matmuls(tmp_path / "recognizer.onnx", 3)
    _, info = load_model(path)
    events = _events(info, "int8-dynamic")
    ready = _ready(events)
    said = [e.message for e in events if isinstance(e, Notice)]
    assert any("3 Constant weights folded into initializers" in m for m in said), said
    assert ready.details["quantized"]["MatMul"] == [3, 3]
    assert ready.details["quantized_nodes"] == 3
    assert quantized_summary(ready.details) == "3 of 3 MatMul quantized"
    ops = {n.op_type for n in onnx.load(ready.path).graph.node}
    assert "MatMulInteger" in ops and "Constant" not in ops
    feeds = {"x": np.random.default_rng(3).standard_normal((4, 32)).astype(np.float32)}
    ref, got = _run(path, feeds), _run(ready.path, feeds)
    cosine = float(np.dot(ref.ravel(), got.ravel()) / np.linalg.norm(ref) / np.linalg.norm(got))
    assert cosine > 0.99 and not np.array_equal(ref, got)  # INT8 really ran


def test_conv_only_model_is_refused_by_dynamic_int8_and_never_cached(
    tmp_path: Path, own_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, info = load_model(_convs(tmp_path / "detector.onnx", 3))
    line = (
        "INT8 dynamic quantized 0 of 3 Conv: dynamic INT8 quantizes MatMul, Gemm, Attention "
        "and LSTM only; try INT8 static"
    )
    with pytest.raises(ModelError) as first:
        _events(info, "int8-dynamic")
    assert first.value.message == line and "\n" not in str(first.value)
    variants_dir = own_cache / "variants"
    assert not variants_dir.exists() or list(variants_dir.iterdir()) == []
    built = []
    inner = variants._build_int8_dynamic
    monkeypatch.setattr(variants, "_build_int8_dynamic",
                        lambda *a: built.append(a) or inner(*a))  # fmt: skip
    with pytest.raises(ModelError) as second:
        _events(info, "int8-dynamic")
    assert second.value.message == line and built == []  # remembered: no second build
    assert not variants_dir.exists() or list(variants_dir.iterdir()) == []


def test_constant_weights_not_folded_are_said_as_the_cause(
    tmp_path: Path, own_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_preprocessing(monkeypatch)
    monkeypatch.setattr(variants, "_fold_constant_weights", lambda path: 0)
    _, info = load_model(_constant_matmuls(tmp_path / "unfolded.onnx", 2))
    with pytest.raises(ModelError) as err:
        _events(info, "int8-dynamic")
    assert (
        err.value.message
        == "INT8 dynamic quantized 0 of 2 MatMul: their weights are Constant nodes"
    )


def test_no_quantizable_node_is_refused(tmp_path: Path, own_cache: Path) -> None:
    xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    yo = helper.make_tensor_value_info("out", TensorProto.FLOAT, [4])
    path = _save([helper.make_node("Relu", ["x"], ["out"], name="r")], [], xi, yo,
                 tmp_path / "relu.onnx")  # fmt: skip
    _, info = load_model(path)
    said = (
        "INT8 dynamic quantized nothing: this model has no node INT8 dynamic can quantize "
        "(MatMul, Gemm, Attention and LSTM)"
    )
    with pytest.raises(ModelError) as err:
        _events(info, "int8-dynamic")
    assert err.value.message == said


def test_an_old_cached_zero_build_is_refused(tmp_path: Path, own_cache: Path) -> None:
    """An entry an older builder kept with nothing quantized raises too."""
    path = _matmul_and_gemm(tmp_path / "mg.onnx")
    _, info = load_model(path)
    ready = _ready(_events(info, "int8-dynamic"))
    meta_file = Path(ready.path).parent / "meta.json"
    meta = json.loads(meta_file.read_text())
    meta["quantized_nodes"] = 0
    meta.pop("quantized")
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(ModelError, match="INT8 dynamic quantized 0 nodes"):
        _events(info, "int8-dynamic")


def test_counts_per_op_type_for_matmul_and_gemm(tmp_path: Path, own_cache: Path) -> None:
    _, info = load_model(_matmul_and_gemm(tmp_path / "mg.onnx"))
    ready = _ready(_events(info, "int8-dynamic"))
    q = ready.details["quantized"]
    # dynamic INT8 quantizes stored weights: the activation x activation ones stay FP32
    assert q == {"MatMul": [2, 3], "Gemm": [1, 2], "Attention": [0, 0], "LSTM": [0, 0]}
    assert ready.details["quantized_nodes"] == 3
    assert quantized_summary(ready.details) == "2 of 3 MatMul, 1 of 2 Gemm quantized"
    again = _ready(_events(info, "int8-dynamic"))
    assert again.cached and again.details["quantized"] == q
    kept = _ready(_events(info, "int8-dynamic", exclude=["mm_a"]))
    assert kept.details["quantized"]["MatMul"] == [1, 3]


def test_counts_for_static_int8_on_a_small_cnn(tmp_path: Path, own_cache: Path) -> None:
    _, info = load_model(_convs(tmp_path / "cnn.onnx", 3))

    def calibration() -> Iterator[dict[str, np.ndarray]]:
        rng = np.random.default_rng(4)
        for _ in range(3):
            yield {"image": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)}

    ready = _ready(_events(info, "int8-static", calibration, "cnn", 3))
    q = ready.details["quantized"]
    assert q["Conv"] == [3, 3]
    assert ready.details["quantized_nodes"] >= 3
    assert quantized_summary(ready.details).startswith("3 of 3 Conv quantized")
    only = _ready(_events(info, "int8-static", calibration, "cnn", 3, {"op_types": ["Conv"]}))
    assert only.details["quantized"] == {"Conv": [3, 3]}
    static_ops = {n.op_type for n in onnx.load(only.path).graph.node}
    assert "DequantizeLinear" in static_ops
    kept = _ready(_events(info, "int8-static", calibration, "cnn", 3, {"op_types": ["Conv"]},
                          exclude=["conv1"]))  # fmt: skip
    assert kept.details["quantized"] == {"Conv": [2, 3]}


def test_dynamic_int8_on_a_cnn_with_a_classifier_warns_with_the_counts(
    tmp_path: Path, own_cache: Path
) -> None:
    """Partly quantized (the classifier's Gemm): a real INT8, with a warning."""
    from tests.conftest import DEMO_CNN

    _, info = load_model(DEMO_CNN)
    events = _events(info, "int8-dynamic")
    said = [e.message for e in events if isinstance(e, Notice) and e.level == "warning"]
    assert said == [
        "0 of 6 Conv quantized: INT8 dynamic quantizes MatMul, Gemm, Attention and LSTM "
        "only (1 of 1 Gemm quantized), so the Conv run in FP32; try INT8 static"
    ]
    assert _ready(events).details["quantized"]["Gemm"] == [1, 1]


def test_quantized_summary_text() -> None:
    meta = {"quantized": {"MatMul": [12, 13], "Gemm": [0, 2], "Attention": [0, 0],
                          "LSTM": [0, 0]}, "quantized_nodes": 12}  # fmt: skip
    assert quantized_summary(meta) == "12 of 13 MatMul, 0 of 2 Gemm quantized"
    static = {"quantized": {"Conv": [64, 64], "Gemm": [1, 1], "Relu": [50, 60],
                            "Reshape": [0, 2]}}  # fmt: skip
    assert (
        quantized_summary(static)
        == "64 of 64 Conv, 1 of 1 Gemm quantized (and 50 of 62 other nodes)"
    )
    assert quantized_summary({"quantized": {"Relu": [2, 3]}}) == "2 of 3 Relu quantized"
    assert quantized_summary({"quantized_nodes": 5}) == "5 node(s) quantized"
    assert quantized_summary({"precision": "fp16"}) == ""


def test_every_node_kept_in_fp32_on_purpose_is_not_refused(tmp_path: Path, own_cache: Path) -> None:
    """A search's attempt that keeps every quantizable node in FP32 asked for it: built
    (and cached), its counts saying 0 of N."""
    _, info = load_model(_matmul_and_gemm(tmp_path / "mg.onnx"))
    every = ["mm_a", "mm_b", "mm_act", "gemm_w", "gemm_act"]
    events = _events(info, "int8-dynamic", exclude=every)
    ready = _ready(events)
    assert ready.details["quantized_nodes"] == 0 and ready.details["all_excluded"]
    assert ready.details["quantized"]["MatMul"] == [0, 3]
    assert not [e for e in events if isinstance(e, Notice) and e.level == "warning"]
    assert _ready(_events(info, "int8-dynamic", exclude=every)).cached


def test_an_opset_11_model_is_quantized_per_channel_after_conversion(
    tmp_path: Path, own_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PaddleOCR export is opset 11: per-channel weights need DequantizeLinear's axis
    (opset 13), and static INT8 wrote a model ONNX Runtime refused to load. The source is
    converted first (and when it cannot be, the weights go per tensor)."""
    path = _convs(tmp_path / "old.onnx")
    model = onnx.load(str(path))
    del model.opset_import[:]
    model.opset_import.extend([helper.make_opsetid("", 11)])
    onnx.save(model, str(path))
    _no_preprocessing(monkeypatch)  # (as the recognizer's: ORT's pre-processing gave up)
    _, info = load_model(str(path))
    rng = np.random.default_rng(0)
    feeds = [{"image": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)} for _ in range(4)]
    events = _events(info, "int8-static", lambda: iter(feeds), "t", len(feeds))
    said = [e.message for e in events if isinstance(e, Notice)]
    assert any("opset 11 converted to 13" in m for m in said), said
    ready = _ready(events)
    assert _run(ready.path, feeds[0]).shape == (1, 4, 16, 16)  # ONNX Runtime loads it
    assert ready.details["quantized"]["Conv"] == [3, 3]
