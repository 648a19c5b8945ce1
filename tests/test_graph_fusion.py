"""Fusion made visible (engine/model/graph_fusion.py): ONNX Runtime optimizes small graphs
with known fusions (LayerNormalization, Gelu, MatMul+Add), and each fused node is mapped
back to the original nodes it replaced, by the tensors at the region's borders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from engine.model.graph_fusion import fused_origins, removed
from engine.model.graph_io import graph_nodes

H = 8


def _const(name: str, value: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(value.astype(np.float32), name)


def _model() -> onnx.ModelProto:
    """x -> LayerNorm (decomposed) -> MatMul + Add -> Gelu (decomposed, erf) -> y."""
    n = helper.make_node
    nodes = [
        n("ReduceMean", ["x"], ["mean"], name="ln_mean", axes=[-1]),
        n("Sub", ["x", "mean"], ["d"], name="ln_sub"),
        n("Pow", ["d", "two"], ["d2"], name="ln_pow"),
        n("ReduceMean", ["d2"], ["var"], name="ln_var", axes=[-1]),
        n("Add", ["var", "eps"], ["ve"], name="ln_add_eps"),
        n("Sqrt", ["ve"], ["std"], name="ln_sqrt"),
        n("Div", ["d", "std"], ["xn"], name="ln_div"),
        n("Mul", ["xn", "gamma"], ["xs"], name="ln_scale"),
        n("Add", ["xs", "beta"], ["h"], name="ln_shift"),
        n("MatMul", ["h", "w"], ["m"], name="fc_matmul"),
        n("Add", ["m", "b"], ["f"], name="fc_bias"),
        n("Div", ["f", "sqrt2"], ["f1"], name="gelu_div"),
        n("Erf", ["f1"], ["f2"], name="gelu_erf"),
        n("Add", ["f2", "one"], ["f3"], name="gelu_add"),
        n("Mul", ["f", "f3"], ["f4"], name="gelu_mul"),
        n("Mul", ["f4", "half"], ["y"], name="gelu_half"),
    ]
    rng = np.random.default_rng(0)
    inits = [
        _const("two", np.array(2.0)), _const("eps", np.array(1e-5)),
        _const("gamma", rng.standard_normal(H)), _const("beta", rng.standard_normal(H)),
        _const("w", rng.standard_normal((H, H))), _const("b", rng.standard_normal(H)),
        _const("sqrt2", np.array(np.sqrt(2.0))), _const("one", np.array(1.0)),
        _const("half", np.array(0.5)),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes, "fusions", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, H])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, H])], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def test_known_fusions_map_back_to_the_nodes_they_replaced(tmp_path: Path) -> None:
    model = _model()
    src, opt = tmp_path / "m.onnx", tmp_path / "opt.onnx"
    onnx.save(model, src)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(opt)
    ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])
    run = graph_nodes(onnx.load(str(opt)).graph)
    loaded = graph_nodes(model.graph)
    weights = frozenset(t.name for t in model.graph.initializer)
    origins = fused_origins(run, loaded, ["x"], weights)
    by_type = {n.op_type: origins.get(n.name) for n in run}
    ln = [f"ln_{s}" for s in ("mean", "sub", "pow", "var", "add_eps", "sqrt", "div", "scale",
                              "shift")]  # fmt: skip
    assert by_type.get("LayerNormalization") == ln, (by_type, [n.op_type for n in run])
    gelu = next(t for t in ("BiasGelu", "Gelu") if t in by_type)
    expected = ["gelu_div", "gelu_erf", "gelu_add", "gelu_mul", "gelu_half"]
    if gelu == "BiasGelu":  # the bias Add went into it too
        expected = ["fc_bias", *expected]
    assert by_type[gelu] == expected
    if "Gemm" in by_type:  # MatMul + Add on 3-D input: Reshape, Gemm, Reshape, one group
        assert by_type["Gemm"] == ["fc_matmul", "fc_bias"]
        group = [n.name for n in run if origins.get(n.name) == ["fc_matmul", "fc_bias"]]
        assert len(group) == 3, group
    regions = {tuple(v) for v in origins.values() if v}  # each loaded node in one region
    claimed = [x for v in regions for x in v]
    assert len(claimed) == len(set(claimed)) == len(loaded)


def test_unchanged_nodes_replace_nothing_and_regions_stop_at_kept_nodes() -> None:
    from engine.model.graph_io import NodeIO

    loaded = [NodeIO("a", "Relu", ("x",), ("p",)), NodeIO("b", "Neg", ("p",), ("q",)),
              NodeIO("c", "Exp", ("q",), ("y",))]  # fmt: skip
    # b and c fused into one node; a still runs; a layout copy reads a renamed tensor
    run = [NodeIO("a", "Relu", ("x",), ("p",)), NodeIO("bc", "NegExp", ("p",), ("y",)),
           NodeIO("copy", "Reorder", ("p_nchwc",), ("z",))]  # fmt: skip
    origins = fused_origins(run, loaded, ["x"])
    assert origins == {"bc": ["b", "c"], "copy": []}
    assert removed(run, loaded, origins) == []
    folded = [NodeIO("a", "Relu", ("x",), ("p",)), NodeIO("c", "Exp", ("p",), ("y",))]
    assert removed(folded, loaded, fused_origins(folded, loaded, ["x"])) == ["b"]
    renamed = [NodeIO("a", "Relu", ("x",), ("p",)), NodeIO("bc", "NegExp", ("p_new",), ("y",))]
    assert fused_origins(renamed, loaded, ["x"]) == {"bc": ["b", "c"]}  # stops at kept a


def test_an_nchwc_chain_splits_by_name_and_reorders_replace_nothing() -> None:
    """What ONNX Runtime makes of Conv -> Sigmoid -> Mul blocks on CPU (issue #50): NCHWc
    Convs and QuickGelus joined by blocked tensors only, reorders at the chain's ends, a
    weight's Identity folded. Each QuickGelu replaced its own Sigmoid and Mul."""
    from engine.model.graph_io import NodeIO

    def block(b: str, x: str) -> list[NodeIO]:
        return [NodeIO(f"/{b}/conv/Conv", "Conv", (x, f"{b}.w", "bias"), (f"/{b}/c",)),
                NodeIO(f"/{b}/Sigmoid", "Sigmoid", (f"/{b}/c",), (f"/{b}/s",)),
                NodeIO(f"/{b}/Mul", "Mul", (f"/{b}/c", f"/{b}/s"), (f"/{b}/m",))]  # fmt: skip

    loaded = [NodeIO("Identity_0", "Identity", ("b0",), ("bias",)), *block("down", "x"),
              *block("a", "/down/m"), *block("b", "/down/m"),
              NodeIO("/Concat", "Concat", ("/a/m", "/b/m"), ("y",))]  # fmt: skip

    def run_block(b: str, x: str, t: str) -> list[NodeIO]:
        gelu = f"/{b}/Mul/QuickGeluFusion/"
        return [NodeIO(f"/{b}/c_nchwc", "Conv", (x, f"r_{b}", "b0"), (f"{t}c",)),
                NodeIO(gelu, "QuickGelu", (f"{t}c",), (f"{t}m",))]  # fmt: skip

    run = [NodeIO("ReorderInput", "ReorderInput", ("x",), ("tx",)),
           *run_block("down", "tx", "t1"), *run_block("a", "t1m", "t2"),
           *run_block("b", "t1m", "t3"),
           NodeIO("ReorderOutput", "ReorderOutput", ("t2m",), ("/a/m",)),
           NodeIO("ReorderOutput_1", "ReorderOutput", ("t3m",), ("/b/m",)),
           NodeIO("/Concat", "Concat", ("/a/m", "/b/m"), ("y",))]  # fmt: skip
    weights = frozenset({"b0", "down.w", "a.w", "b.w"})
    origins = fused_origins(run, loaded, ["x"], weights)
    assert origins["ReorderInput"] == origins["ReorderOutput"] == []
    for b in ("down", "a", "b"):
        assert origins[f"/{b}/c_nchwc"] == [f"/{b}/conv/Conv"]
        assert origins[f"/{b}/Mul/QuickGeluFusion/"] == [f"/{b}/Sigmoid", f"/{b}/Mul"]
    assert removed(run, loaded, origins) == ["Identity_0"]  # folded into the weights
