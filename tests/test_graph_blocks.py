"""Repeated blocks (engine/model/graph_blocks.py): transformer layers and ResNet blocks found
by structure alone, with or without meaningful node names, whatever the file order of the
shape arithmetic; nothing found where nothing repeats."""

from __future__ import annotations

import heapq
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine.model.graph_blocks import Repeats, graph_repeats, repeated_blocks
from engine.model.graph_io import NodeIO, graph_nodes

ROOT = Path(__file__).resolve().parent.parent
MINILM = Path.home() / ".cache" / "opscope-bench" / "paraphrase-minilm-l3" / "model.onnx"
DEMO_TRANSFORMER = ROOT / "resources" / "models" / "demo_transformer.onnx"
SIDE_OPS = {"Constant", "Shape", "Gather", "Unsqueeze", "Concat", "Range"}


class _Builder:
    """Nodes, named `/<scope>/<Op>_<n>`, and initializers for a hand-built graph."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.scope = ""
        self._n = 0

    def __call__(self, op: str, inputs: list[str], **attrs: Any) -> str:
        self._n += 1
        name = f"/{self.scope}/{op}_{self._n}"
        out = f"t{self._n}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def weight(self, *shape: int) -> str:
        name = f"w{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.zeros(shape, np.float32), name))
        return name

    def const(self, value: int | list[int]) -> str:
        """A Constant node per use, as PyTorch's exporter writes them."""
        t = numpy_helper.from_array(np.array(value, np.int64))
        return self("Constant", [], value=t)

    def model(self, inputs: list[onnx.ValueInfoProto], output: str) -> onnx.ModelProto:
        out = helper.make_tensor_value_info(output, TensorProto.FLOAT, [None, None])
        graph = helper.make_graph(self.nodes, "g", inputs, [out], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        return model


def _layernorm(b: _Builder, x: str, d: int) -> str:
    mean = b("ReduceMean", [x], axes=[-1])
    diff = b("Sub", [x, mean])
    var = b("ReduceMean", [b("Pow", [diff, b.weight()])], axes=[-1])
    std = b("Sqrt", [b("Add", [var, b.weight()])])
    return b("Add", [b("Mul", [b("Div", [diff, std]), b.weight(d)]), b.weight(d)])


def _heads_shape(b: _Builder, x: str, heads: int, d: int) -> str:
    """Shape -> Gather -> Unsqueeze -> Concat: x's (batch, seq) and (heads, head size)."""
    dims = [b("Unsqueeze", [b("Gather", [b("Shape", [x]), b.const(i)]), b.const([0])])
            for i in (0, 1)]  # fmt: skip
    return b("Concat", [*dims, b.const([heads]), b.const([d // heads])], axis=0)


def _layer(b: _Builder, h: str, mask: str, d: int, experts: int, pre_norm: bool) -> str:
    """An encoder layer: attention, residual, feed-forward (`experts` parallel ones, summed),
    residual; a norm after each residual (BERT) or before each branch (GPT-2, ViT)."""
    x = _layernorm(b, h, d) if pre_norm else h
    qkv = []
    for perm in ([0, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3]):
        y = b("Add", [b("MatMul", [x, b.weight(d, d)]), b.weight(d)])
        qkv.append(b("Transpose", [b("Reshape", [y, _heads_shape(b, x, 4, d)])], perm=perm))
    scores = b("Add", [b("Div", [b("MatMul", qkv[:2]), b.weight()]), mask])
    ctx = b(
        "Transpose", [b("MatMul", [b("Softmax", [scores], axis=-1), qkv[2]])], perm=[0, 2, 1, 3]
    )
    dims = [b("Unsqueeze", [b("Gather", [b("Shape", [x]), b.const(i)]), b.const([0])])
            for i in (0, 1)]  # fmt: skip
    merged = b("Reshape", [ctx, b("Concat", [*dims, b.const([d])], axis=0)])
    attn = b("Add", [b("MatMul", [merged, b.weight(d, d)]), b.weight(d)])
    h1 = b("Add", [attn, h])
    h1 = h1 if pre_norm else _layernorm(b, h1, d)
    x1 = _layernorm(b, h1, d) if pre_norm else h1
    ffn = ""
    for _ in range(experts):
        up = b("Add", [b("MatMul", [x1, b.weight(d, 4 * d)]), b.weight(4 * d)])
        gelu = b("Mul", [b("Mul", [up, b("Add", [b("Erf", [b("Div", [up, b.weight()])]),
                                                 b.weight()])]), b.weight()])  # fmt: skip
        part = b("MatMul", [gelu, b.weight(4 * d, d)])
        ffn = b("Add", [ffn, part]) if ffn else part
    out = b("Add", [b("Add", [ffn, b.weight(d)]), h1])
    return out if pre_norm else _layernorm(b, out, d)


def _transformer(
    layers: int, *, mask: str = "input", experts: int = 1, pre_norm: bool = False
) -> onnx.ModelProto:
    """Embeddings (word + position), `layers` encoder layers (a norm after the embeddings
    or, pre-norm, before the pooling), mean pooling and a classifier. mask "input": the
    graph input every layer adds to its scores; "derived": (1 - mask) * -1e4, as BERT does."""
    b, d = _Builder(), 16
    b.scope = "embeddings"
    seq = b("Gather", [b("Shape", ["input_ids"]), b.const(1)])
    pos = b("Gather", [b.weight(64, d), b("Range", [b.const(0), seq, b.const(1)])])
    h = b("Add", [b("Gather", [b.weight(100, d), "input_ids"]), pos])
    h = h if pre_norm else _layernorm(b, h, d)
    m = "mask"
    if mask == "derived":
        m = b("Mul", [b("Sub", [b.weight(), b("Unsqueeze", ["mask", b.const([1, 2])])]),
                      b.weight()])  # fmt: skip
    for i in range(layers):
        b.scope = f"encoder/layer.{i}"
        h = _layer(b, h, m, d, experts, pre_norm)
    b.scope = "pooler"
    h = _layernorm(b, h, d) if pre_norm else h
    pooled = b("ReduceMean", [h], axes=[1], keepdims=0)
    logits = b("Add", [b("MatMul", [pooled, b.weight(d, 2)]), b.weight(2)])
    shape: list[str | int] = ["batch", "seq"]
    mask_shape: list[str | int] = shape if mask == "derived" else ["batch", 1, 1, "seq"]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, shape),
              helper.make_tensor_value_info("mask", TensorProto.FLOAT, mask_shape)]  # fmt: skip
    return b.model(inputs, logits)


def _resnet() -> onnx.ModelProto:
    """Stem, three identical residual blocks, a downsampling block, a gated block, head."""
    b, c = _Builder(), 8

    def conv(x: str, k: int = 3, stride: int = 1) -> str:
        y = b("Conv", [x, b.weight(c, c, k, k)], pads=[k // 2] * 4, strides=[stride] * 2)
        return b("BatchNormalization", [y, *(b.weight(c) for _ in range(4))])

    b.scope = "stem"
    x = b("Relu", [conv("image")])
    for i in range(3):
        b.scope = f"layer1/block.{i}"
        x = b("Relu", [b("Add", [conv(b("Relu", [conv(x)])), x])])
    b.scope = "layer2/down"
    x = b("Relu", [b("Add", [conv(b("Relu", [conv(x, stride=2)])), conv(x, 1, 2)])])
    b.scope = "layer2/gate"
    y = conv(x)
    x = b("Relu", [b("Add", [b("Mul", [y, b("Sigmoid", [y])]), x])])
    b.scope = "head"
    out = b("Gemm", [b("Flatten", [b("GlobalAveragePool", [x])]), b.weight(c, 10)])
    return b.model([helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, c, 32, 32])], out)


def _resnet_stages(depths: tuple[int, ...] = (3, 4, 6, 3)) -> onnx.ModelProto:
    """ResNet-50's layout (BatchNorm folded): each stage a downsampling bottleneck (with a
    1x1 Conv on the shortcut) and identical ones."""
    b, c = _Builder(), 8

    def conv(x: str, k: int) -> str:
        return b("Conv", [x, b.weight(c, c, k, k)], pads=[k // 2] * 4)

    b.scope = "stem"
    x = b("MaxPool", [b("Relu", [conv("image", 7)])], kernel_shape=[3, 3])
    for i, depth in enumerate(depths):
        for j in range(depth):
            b.scope = f"stage{i}/block.{j}"
            y = conv(b("Relu", [conv(b("Relu", [conv(x, 1)]), 3)]), 1)
            x = b("Relu", [b("Add", [y, conv(x, 1) if j == 0 else x])])
    b.scope = "head"
    out = b("Gemm", [b("Flatten", [b("GlobalAveragePool", [x])]), b.weight(c, 10)])
    return b.model([helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, c, 32, 32])], out)


def _optimized(model: onnx.ModelProto, tmp_path: Path) -> onnx.ModelProto:
    """The graph ONNX Runtime runs (all optimizations) as it saves it."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return onnx.load(so.optimized_model_filepath)


def _reorder(model: onnx.ModelProto, seed: int, *, only_side: bool) -> list[str]:
    """Rewrites the file order at random but topologically (the side chains, or every node)
    and drops the names; returns the old name of each node, in the new order."""
    nodes = list(model.graph.node)
    producer = {t: i for i, n in enumerate(nodes) for t in n.output}
    deps = [{producer[t] for t in n.input if t in producer} for n in nodes]
    rng = random.Random(seed)
    key = [rng.uniform(0, len(nodes)) if not only_side or n.op_type in SIDE_OPS else float(i)
           for i, n in enumerate(nodes)]  # fmt: skip
    waiting = [len(d) for d in deps]
    users: list[list[int]] = [[] for _ in nodes]
    for i, d in enumerate(deps):
        for p in d:
            users[p].append(i)
    ready = [(key[i], i) for i in range(len(nodes)) if not waiting[i]]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)[1]
        order.append(i)
        for u in users[i]:
            waiting[u] -= 1
            if not waiting[u]:
                heapq.heappush(ready, (key[u], u))
    old = [nodes[i].name for i in order]
    for n in nodes:
        n.name = ""
    del model.graph.node[:]
    model.graph.node.extend(nodes[i] for i in order)
    return old


def _layer_of(name: str) -> str:
    return name.split("/")[2] if name.startswith("/encoder/") else ""


def _check_disjoint(found: list[Repeats]) -> None:
    names = [n for r in found for blk in r.blocks for n in blk.nodes]
    assert len(names) == len(set(names))


def _layers_found(model: onnx.ModelProto, found: list[Repeats]) -> None:
    """One run whose blocks are the layers, node for node, labelled by their scope."""
    assert len(found) == 1
    blocks = found[0].blocks
    names = [n.name for n in model.graph.node]
    assert [blk.label for blk in blocks] == [f"encoder/layer.{i}" for i in range(len(blocks))]
    assert {_layer_of(n) for n in names} - {""} == {f"layer.{i}" for i in range(len(blocks))}
    for i, blk in enumerate(blocks):
        assert set(blk.nodes) == {n for n in names if _layer_of(n) == f"layer.{i}"}
        assert list(blk.nodes) == sorted(blk.nodes, key=names.index)  # in file order
    assert len({len(blk.nodes) for blk in blocks}) == 1
    assert found[0].signature.startswith(f"{len(blocks[0].nodes)} nodes: ")
    assert "MatMul x8" in found[0].signature


@pytest.mark.parametrize("pre_norm", [False, True])
@pytest.mark.parametrize("mask", ["input", "derived"])
@pytest.mark.parametrize("layers", [2, 3, 12])
def test_transformer_layers_are_the_blocks(layers: int, mask: str, pre_norm: bool) -> None:
    model = _transformer(layers, mask=mask, pre_norm=pre_norm)
    _layers_found(model, graph_repeats(model.graph))


def test_as_the_graph_view_asks() -> None:
    """engine/run/graph_job.py passes no weights (they are read by nobody's output), and
    bench/graph_speed.py's sketches no inputs either: inputs are nodes reading nothing."""
    model = _transformer(3, mask="derived")
    nodes = graph_nodes(model.graph)
    _layers_found(model, repeated_blocks(nodes, ["input_ids", "mask"], frozenset()))
    sources = [NodeIO(t, "Input", (), (t,)) for t in ("input_ids", "mask")]
    _layers_found(model, repeated_blocks(sources + nodes, [], frozenset()))


@pytest.mark.parametrize("only_side", [True, False])
@pytest.mark.parametrize(("layers", "seed"), [(2, 0), (3, 1), (12, 2), (12, 3)])
def test_unnamed_and_reordered(layers: int, seed: int, only_side: bool) -> None:
    """No names, and the file order shuffled (topologically): the shape arithmetic's, or
    every node's."""
    model = _transformer(layers, mask="derived" if seed % 2 else "input", pre_norm=seed > 2)
    old = _reorder(model, seed, only_side=only_side)
    nodes = graph_nodes(model.graph)
    layer = {n.name: _layer_of(o) for n, o in zip(nodes, old, strict=True)}
    found = graph_repeats(model.graph)
    assert len(found) == 1
    blocks = found[0].blocks
    assert [blk.label for blk in blocks] == [f"block {i + 1}" for i in range(layers)]
    for i, blk in enumerate(blocks):
        assert set(blk.nodes) == {n for n, lay in layer.items() if lay == f"layer.{i}"}


def test_optimized_by_onnx_runtime(tmp_path: Path) -> None:
    """Fused LayerNorm, Gelu, MatMul with scale: the layers are still the blocks."""
    model = _optimized(_transformer(6, mask="derived"), tmp_path)
    found = graph_repeats(model.graph)
    assert [len(r.blocks) for r in found] == [6]
    assert [blk.label for blk in found[0].blocks] == [f"encoder/layer.{i}" for i in range(6)]
    demo = graph_repeats(_optimized(onnx.load(str(DEMO_TRANSFORMER)), tmp_path).graph)
    assert [len(r.blocks) for r in demo] == [4]


def test_no_repetition() -> None:
    b = _Builder()
    x = b("Relu", [b("Conv", ["image", b.weight(8, 3, 3, 3)])])
    y = b("MaxPool", [x], kernel_shape=[2, 2])
    z = b("Conv", [y, b.weight(8, 8, 1, 1)])
    z = b("Mul", [z, b("Sigmoid", [z])])
    z = b("Add", [b("BatchNormalization", [z, *(b.weight(8) for _ in range(4))]), y])
    z = b("Softmax", [b("Gemm", [b("Flatten", [b("GlobalAveragePool", [z])]), b.weight(8, 4)])])
    model = b.model([helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 8, 8])], z)
    assert graph_repeats(model.graph) == []
    assert repeated_blocks([], [], set()) == []


def test_resnet_blocks() -> None:
    """Three identical residual blocks, then two different ones."""
    model = _resnet()
    found = graph_repeats(model.graph)
    assert len(found) == 1
    blocks = found[0].blocks
    assert [blk.label for blk in blocks] == [f"layer1/block.{i}" for i in range(3)]
    for i, blk in enumerate(blocks):
        want = {n.name for n in model.graph.node if n.name.startswith(f"/layer1/block.{i}/")}
        assert set(blk.nodes) == want
    assert found[0].signature == "7 nodes: Conv x2, BatchNormalization x2, Relu x2, Add x1"


def test_resnet_stages() -> None:
    """Each stage's identical bottlenecks, not the downsampling one before them, nor a unit
    of six blocks that stages 2 and 3 happen to share (their last 3 and first 3)."""
    model = _resnet_stages()
    found = graph_repeats(model.graph)
    assert [len(r.blocks) for r in found] == [2, 3, 5, 2]
    for i, run in enumerate(found):
        assert [blk.label for blk in run.blocks] == [
            f"stage{i}/block.{j + 1}" for j in range(len(run.blocks))
        ]
        for j, blk in enumerate(run.blocks):
            scope = f"/stage{i}/block.{j + 1}/"
            assert set(blk.nodes) == {n.name for n in model.graph.node if n.name.startswith(scope)}
    _check_disjoint(found)


def test_speed() -> None:
    """24 layers of some 240 nodes (16 parallel feed-forward branches each)."""
    model = _transformer(24, experts=16)
    nodes = graph_nodes(model.graph)
    assert len(nodes) > 5000
    weights = {t.name for t in model.graph.initializer}
    start = time.perf_counter()
    found = repeated_blocks(nodes, ["input_ids", "mask"], weights)
    took = time.perf_counter() - start
    assert [len(r.blocks) for r in found] == [24]
    assert took < 2.0, took


def test_demo_transformer() -> None:
    """The bundled demo: 4 post-norm layers, exported by the dynamo exporter (no scopes)."""
    found = graph_repeats(onnx.load(str(DEMO_TRANSFORMER)).graph)
    assert [len(r.blocks) for r in found] == [4]
    assert [blk.label for blk in found[0].blocks] == [f"block {i}" for i in range(1, 5)]
    assert len({len(blk.nodes) for blk in found[0].blocks}) == 1
    _check_disjoint(found)


@pytest.mark.skipif(not MINILM.exists(), reason="the MiniLM benchmark model is not cached")
def test_minilm() -> None:
    """A real 3-layer BERT (PyTorch's TorchScript exporter: scopes, Constant nodes)."""
    graph = onnx.load(str(MINILM)).graph
    found = graph_repeats(graph)
    assert len(found) == 1
    labels = [blk.label for blk in found[0].blocks]
    assert labels == ["encoder/layer.0", "encoder/layer.1", "encoder/layer.2"]
    for i, blk in enumerate(found[0].blocks):
        scoped = {n.name for n in graph.node if f"/encoder/layer.{i}/" in n.name}
        assert scoped <= set(blk.nodes)
        assert all(n in scoped or "/" not in n for n in blk.nodes)  # and unscoped constants
