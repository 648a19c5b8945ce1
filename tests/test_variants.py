"""FP16 / INT8 variants built with ONNX Runtime's tools, cached by model hash and params."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from engine import cache
from engine.backends.ort.variants import build_variant
from engine.errors import ModelError
from engine.events import Progress, VariantReady
from engine.model.info import load_model
from tests.conftest import DEMO_CNN


def _ready(events: list[object]) -> VariantReady:
    ready = [e for e in events if isinstance(e, VariantReady)]
    assert len(ready) == 1
    return ready[0]


def _feeds(n: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"image": rng.standard_normal((n, 3, 64, 64)).astype(np.float32)}


@pytest.mark.parametrize(
    ("precision", "op"),
    [
        ("fp16", "Cast"),
        ("int8-dynamic", "DynamicQuantizeLinear"),
        ("int8-static", "QuantizeLinear"),
    ],
)
def test_variant_builds_runs_and_caches(
    precision: str, op: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))  # a cold cache of our own
    _, info = load_model(DEMO_CNN)

    def calibration():  # type: ignore[no-untyped-def]
        for i in range(4):
            yield _feeds(2, seed=i)

    events = list(build_variant(info, precision, calibration, "test", 4))
    first = _ready(events)
    assert not first.cached and first.build_s > 0
    assert any(isinstance(e, Progress) for e in events)
    built = onnx.load(first.path)
    ops = {n.op_type for n in built.graph.node}
    if precision == "int8-dynamic" and op not in ops:
        pytest.fail(f"no {op} in {sorted(ops)}")  # Conv nets get ConvInteger via dynamic q
    assert op in ops or precision == "int8-dynamic"
    sess = ort.InferenceSession(first.path, providers=["CPUExecutionProvider"])
    (out,) = sess.run(None, _feeds(2))
    assert out.shape == (2, 10) and out.dtype == np.float32  # I/O types kept
    if precision == "int8-static":
        assert any(isinstance(e, Progress) and e.stage == "calibration" for e in events)
    again = _ready(list(build_variant(info, precision, calibration, "test", 4)))
    assert again.cached and again.path == first.path
    assert again.build_s == pytest.approx(first.build_s)


def test_fp32_is_the_original_file() -> None:
    _, info = load_model(DEMO_CNN)
    ready = _ready(list(build_variant(info, "fp32")))
    assert ready.path == str(DEMO_CNN)


def test_cache_key_depends_on_model_and_params() -> None:
    a = cache.cache_key({"model": "1", "precision": "fp16"})
    assert a == cache.cache_key({"precision": "fp16", "model": "1"})
    assert a != cache.cache_key({"model": "2", "precision": "fp16"})


def test_failed_build_leaves_no_cache_entry() -> None:
    """Calibration data of the wrong shape makes the calibration run fail."""
    _, info = load_model(DEMO_CNN)

    def wrong_shape():  # type: ignore[no-untyped-def]
        yield {"image": np.zeros((1, 3, 7), np.float32)}

    with pytest.raises(ModelError, match="cannot build the int8-static variant"):
        list(build_variant(info, "int8-static", wrong_shape, "wrong-shape", 1))
    folder = cache.cache_root() / "variants"
    assert [p for p in folder.iterdir() if p.name.startswith(".")] == []


def test_cancelled_build_leaves_no_debris() -> None:
    _, info = load_model(DEMO_CNN)

    def calibration():  # type: ignore[no-untyped-def]
        for i in range(50):
            yield _feeds(1, seed=i)

    gen = build_variant(info, "int8-static", calibration, "cancel-test", 50)
    for ev in gen:
        if isinstance(ev, Progress) and ev.stage == "calibration" and ev.done >= 1:
            break
    gen.close()
    leftovers = [p for p in (cache.cache_root() / "variants").iterdir() if p.name.startswith(".")]
    assert leftovers == []


def test_static_int8_for_transformers_keeps_activation_matmuls_in_fp32(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The transformer setting (weights' MatMuls only): attention's Q x K^T and weights x V
    stay FP32 MatMuls fed by float tensors; the MatMuls with weights get QDQ inputs."""
    from engine.backends.ort.activation_matmuls import activation_matmuls
    from engine.model.inputs import generate_inputs, plan_inputs
    from tests.conftest import DEMO_TRANSFORMER

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))
    _, info = load_model(DEMO_TRANSFORMER)
    acts = activation_matmuls(DEMO_TRANSFORMER)
    weighted = [n.name for n in onnx.load(str(DEMO_TRANSFORMER)).graph.node
                if n.op_type == "MatMul" and n.name not in acts]  # fmt: skip
    assert len(acts) == 8 and weighted  # 2 per layer, 4 layers

    model, plan = onnx.load(str(DEMO_TRANSFORMER)), plan_inputs(info, 2)

    def calibration():  # type: ignore[no-untyped-def]
        for i in range(4):
            yield generate_inputs(model, info, plan, seed=i)

    settings = {"op_types": ["MatMul", "Gemm"], "activation_matmuls": False}
    ready = _ready(list(build_variant(info, "int8-static", calibration, "t", 4, settings)))
    graph = onnx.load(ready.path).graph
    made_by = {o: n.op_type for n in graph.node for o in n.output}
    nodes = {n.name: n for n in graph.node}
    for name in acts:
        assert nodes[name].op_type == "MatMul"
        assert all(made_by.get(i) != "DequantizeLinear" for i in nodes[name].input), name
    assert any(
        made_by.get(i) == "DequantizeLinear" for n in weighted if n in nodes for i in nodes[n].input
    )
    assert {n.op_type for n in graph.node if n.op_type in ("Softmax", "LayerNormalization")}
    assert not any(made_by.get(i) == "DequantizeLinear"
                   for n in graph.node if n.op_type == "Softmax" for i in n.input)  # fmt: skip
    # ORT's quantizer points every reader of a quantized activation at its 8-bit copy: the
    # residual Adds read the LayerNorm output through Q/DQ. Only quantized MatMuls may.
    qdq = ("QuantizeLinear", "DequantizeLinear")
    readers = {n.op_type for n in graph.node if n.op_type not in qdq
               and any(made_by.get(i) == "DequantizeLinear" for i in n.input)}  # fmt: skip
    assert readers == {"MatMul", "Gemm"}
    residual = [n for n in graph.node if n.op_type == "Add"
                and any(made_by.get(i) == "LayerNormalization" for i in n.input)]  # fmt: skip
    assert residual  # the float LayerNorm output reaches the residual Add itself


def test_dynamic_int8_says_when_it_leaves_the_convolutions_in_fp32(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dynamic INT8 quantizes MatMul/Gemm/Attention/LSTM only: on a CNN it said nothing
    while the Conv ran in FP32 under the INT8 name (a detector: speed unchanged)."""
    from engine.events import Notice
    from tests.conftest import DEMO_TRANSFORMER

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))
    _, cnn = load_model(DEMO_CNN)
    for _ in range(2):  # built, then from the cache: said both times
        events = list(build_variant(cnn, "int8-dynamic"))
        said = [e.message for e in events if isinstance(e, Notice) and e.level == "warning"]
        assert len(said) == 1 and "0 of 6 Conv quantized" in said[0], said
        assert _ready(events).details["quantized_nodes"] > 0  # the classifier's Gemm
    _, transformer = load_model(DEMO_TRANSFORMER)
    events = list(build_variant(transformer, "int8-dynamic"))
    assert not [e for e in events if isinstance(e, Notice) and e.level == "warning"]
