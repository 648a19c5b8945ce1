"""Fusion made visible on CNNs (issue #50): what each node of the graph as ONNX Runtime runs
it (fusion 'all', CPU) replaced, on a YOLO-style CNN (Conv -> Sigmoid -> Mul blocks, which
ORT fuses into QuickGelu; layout reorders and NCHWc Convs) and an OCR-style one (Conv + BN +
HardSwish blocks, a sequence, MatMul + Add layers, Softmax). The graph is the one the graph
view gets (engine/backends/ort/graph_as_run.py); the origins are the job's."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine.backends.ort.graph_as_run import as_run
from engine.config import RunConfig
from engine.model.graph_fusion import by_name, fused_origins, removed
from engine.model.graph_io import NodeIO, graph_nodes

REORDER = ("ReorderInput", "ReorderOutput")


def _origins(
    path: Path, shape: tuple[int, ...]
) -> tuple[list[NodeIO], list[NodeIO], dict[str, list[str]]]:
    """The graph as run and each run node's origins, as the graph job finds them."""
    model = onnx.load(str(path))
    feeds = {"x": np.random.default_rng(0).random(shape, dtype=np.float32)}
    ran = as_run(str(path), RunConfig(provider="cpu"), feeds)
    assert ran.model is not None, ran.error
    run, loaded = graph_nodes(ran.model.graph), graph_nodes(model.graph)
    weights = frozenset(t.name for t in model.graph.initializer)
    origins = by_name(fused_origins(run, loaded, ["x"], weights), run, loaded)
    # no loaded node in two regions (run nodes that together replaced some, a Gemm and
    # its reshapes, share one region)
    claimed = [x for v in {tuple(v) for v in origins.values()} for x in v]
    assert len(claimed) == len(set(claimed)), origins
    return run, loaded, origins


def _folded_only(run: list[NodeIO], loaded: list[NodeIO], origins: dict[str, list[str]]) -> None:
    """What no run node stands for was folded into constants (shapes, weight aliases)."""
    left = removed(run, loaded, origins)
    ops = {n.name: n.op_type for n in loaded}
    assert {ops[x] for x in left} <= {"Identity", "Constant", "Shape", "Slice", "Concat"}, left


def _yolo(path: Path) -> None:
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Block(nn.Module):  # Conv (BatchNorm folded at export) -> SiLU as x * sigmoid(x)
        def __init__(self, i: int, o: int, k: int = 3, s: int = 1) -> None:
            super().__init__()
            self.conv = nn.Conv2d(i, o, k, s, k // 2, bias=False)
            self.bn = nn.BatchNorm2d(o)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.bn(self.conv(x))
            return y * torch.sigmoid(y)

    class Yolo(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem, self.down = Block(3, 8, 3, 2), Block(8, 16, 3, 2)
            self.a, self.b, self.fuse = Block(16, 8, 1), Block(16, 8, 1), Block(16, 16, 1)
            self.deep, self.neck = Block(16, 16, 3, 2), Block(32, 16)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.head1, self.head2 = nn.Conv2d(16, 6, 1), nn.Conv2d(16, 6, 1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.down(self.stem(x))
            x = self.fuse(torch.cat([self.a(x), self.b(x)], 1))  # a C2f-like split and join
            d = self.deep(x)
            n = self.neck(torch.cat([self.up(d), x], 1))  # the neck's upsample and concat
            return torch.cat([self.head1(n).flatten(2), self.head2(d).flatten(2)], 2)

    torch.manual_seed(0)
    model = Yolo().eval()
    with warnings.catch_warnings():  # the TorchScript exporter says it is the legacy one
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(model, (torch.randn(1, 3, 64, 64),), str(path), dynamo=False,
                          opset_version=17, input_names=["x"], output_names=["y"])  # fmt: skip


BLOCKS = ("stem", "down", "a", "b", "fuse", "deep", "neck")


def test_yolo_quickgelu_and_convs_claim_their_own_block_and_reorders_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "yolo.onnx"
    _yolo(path)
    run, loaded, origins = _origins(path, (1, 3, 64, 64))
    ops = {n.name: n.op_type for n in run}
    gelus = [n for n in run if n.op_type == "QuickGelu"]
    assert len(gelus) == len(BLOCKS), [n.op_type for n in run]
    for n in gelus:  # '/down/Mul/QuickGeluFusion/': /down/Sigmoid and /down/Mul, no more
        block = n.name.split("/")[1]
        assert origins[n.name] == [f"/{block}/Sigmoid", f"/{block}/Mul"], (n.name, origins)
    for n in run:
        if n.op_type in REORDER:  # a layout copy replaced nothing
            assert origins.get(n.name, []) == [], (n.name, origins[n.name])
        elif n.op_type == "Conv" and n.name in origins:  # an NCHWc Conv: its own Conv only
            conv = n.name.removesuffix("_output_0_nchwc")
            assert origins[n.name] == [conv], (n.name, origins[n.name])
        elif n.op_type == "Upsample":
            assert origins[n.name] == ["/up/Resize"], (n.name, origins[n.name])
    # every Sigmoid and Mul of the blocks is claimed by its block's QuickGelu alone
    owner = {x: k for k, v in origins.items() for x in v}
    for block in BLOCKS:
        for op in ("Sigmoid", "Mul"):
            assert ops[owner[f"/{block}/{op}"]] == "QuickGelu", (block, op, owner)
    _folded_only(run, loaded, origins)  # the Upsample stands for the Resize, not folded


def _ocr(path: Path) -> None:
    """PaddleOCR recognizer-like: 3 x (Conv, BatchNormalization, HardSwish), the feature
    map as a sequence (Reshape, Transpose), 2 x (MatMul, Add) with a HardSwish between,
    Softmax over the classes."""
    rng = np.random.default_rng(0)
    inits: list[onnx.TensorProto] = []

    def w(name: str, *shape: int) -> str:
        inits.append(numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name))
        return name

    n = helper.make_node
    nodes, x = [], "x"
    for b, (ci, co, stride) in enumerate(((3, 8, 2), (8, 16, 2), (16, 16, 2)), 1):
        strides = [stride, stride] if b == 1 else [stride, 1]
        nodes += [
            n("Conv", [x, w(f"b{b}.w", co, ci, 3, 3)], [f"b{b}c"], name=f"b{b}/conv",
              kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=strides),
            n("BatchNormalization", [f"b{b}c", w(f"b{b}.g", co), w(f"b{b}.b", co),
              w(f"b{b}.m", co), f"b{b}.v"], [f"b{b}n"], name=f"b{b}/bn"),
            n("HardSwish", [f"b{b}n"], [f"b{b}h"], name=f"b{b}/act"),
        ]  # fmt: skip
        inits.append(numpy_helper.from_array(np.ones(co, np.float32), f"b{b}.v"))
        x = f"b{b}h"
    inits.append(numpy_helper.from_array(np.array([1, 64, 32], np.int64), "seq_shape"))
    nodes += [
        n("Reshape", [x, "seq_shape"], ["seq"], name="seq/reshape"),
        n("Transpose", ["seq"], ["seq_t"], name="seq/transpose", perm=[0, 2, 1]),
        n("MatMul", ["seq_t", w("fc1.w", 64, 32)], ["f1"], name="fc1/matmul"),
        n("Add", ["f1", w("fc1.b", 32)], ["f1b"], name="fc1/add"),
        n("HardSwish", ["f1b"], ["f1h"], name="fc1/act"),
        n("MatMul", ["f1h", w("fc2.w", 32, 20)], ["f2"], name="fc2/matmul"),
        n("Add", ["f2", w("fc2.b", 20)], ["f2b"], name="fc2/add"),
        n("Softmax", ["f2b"], ["y"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "ocr", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 20])], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def test_ocr_convs_claim_their_bn_and_hardswish_and_the_head_its_matmuls(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ocr.onnx"
    _ocr(path)
    run, loaded, origins = _origins(path, (1, 3, 32, 64))
    convs = [n for n in run if n.op_type in ("Conv", "FusedConv")]
    assert len(convs) == 3, [(n.op_type, n.name) for n in run]
    for n in convs:  # each Conv as run: its block's Conv, BatchNormalization, HardSwish
        block = next(v for v in origins[n.name] if v.endswith("/conv")).split("/")[0]
        assert origins[n.name] == [f"{block}/conv", f"{block}/bn", f"{block}/act"], (
            n.name,
            origins[n.name],
        )
    for n in run:
        if n.op_type in REORDER:
            assert origins.get(n.name, []) == [], (n.name, origins[n.name])
    owner = {x: k for k, v in origins.items() for x in v}
    for layer in ("fc1", "fc2"):  # a MatMul + Add became Gemm (and its reshapes): theirs
        gemm = owner[f"{layer}/matmul"]
        assert owner[f"{layer}/add"] == gemm
        assert set(origins[gemm]) <= {f"{layer}/matmul", f"{layer}/add", f"{layer}/act"}
    kept = {n.name for n in run if n.name not in origins}
    assert {"softmax", "seq/transpose"} <= kept  # still run as they were
    _folded_only(run, loaded, origins)
