"""The graph view's engine side: the graph read from ONNX (inputs and outputs as nodes,
weights apart, If bodies in place, invalid graphs refused in one line naming the node),
the layered layout and its cache, precision per node, the job on the demo models and the
CLI, and the overlays' colours and legends (Qt-free)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from engine.config import RunConfig
from engine.errors import ModelError
from engine.events import drive
from engine.measure.op_stats import OpStat
from engine.model.graph_collapse import collapse
from engine.model.graph_layout import Box, lay_out
from engine.model.graph_precision import precisions
from engine.model.graph_view import INPUT, OUTPUT, inferred, model_graph
from engine.model.workload import Workload
from engine.run.graph_job import GraphRequest, graph_job
from tests.conftest import DEMO_CNN, DEMO_TRANSFORMER
from widgets.models.graph_overlay import FASTER, HEAT, ONLY, SLOWER, NodeFigures, paint


def _model(
    nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto] | None = None
) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph(nodes, "g", [x], [y], inits or [])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_the_graph_has_inputs_outputs_weights_apart_and_stable_names() -> None:
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    m = _model(
        [
            helper.make_node("MatMul", ["x", "w"], ["a"]),  # unnamed: MatMul_0
            helper.make_node("Relu", ["a"], ["y"], name="act"),
        ],
        [w],
    )
    g = model_graph(m, inferred(m, {"x": (2, 4)}))
    assert [(n.name, n.op_type) for n in g.nodes] == [
        ("x", INPUT),
        ("MatMul_0", "MatMul"),
        ("act", "Relu"),
        ("y", OUTPUT),
    ]
    mm = g.by_name["MatMul_0"]
    assert mm.inputs == ("x",) and mm.weights == ("w",)
    assert g.edges == [("x", "MatMul_0", "x"), ("MatMul_0", "act", "a"), ("act", "y", "y")]
    assert g.tensors["a"].text() == "float32[2x4]" and g.tensors["a"].nbytes == 32


def _if_model() -> onnx.ModelProto:
    """x -> ReduceSum -> Greater -> If (then: Neg x, else: Abs x): bodies read x outside."""
    then = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["t"], name="neg")],
        "then",
        [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
    )
    other = helper.make_graph(
        [helper.make_node("Abs", ["x"], ["e"], name="abs")],
        "else",
        [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)],
    )
    return _model(
        [
            helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
            helper.make_node("Greater", ["s", "s"], ["c"], name="cmp"),
            helper.make_node(
                "If", ["c"], ["y"], name="branch", then_branch=then, else_branch=other
            ),
        ]
    )


def test_an_if_body_is_drawn_in_place_and_reads_the_outer_scope() -> None:
    m = _if_model()
    g = model_graph(m)
    inner = {n.name: n.parent for n in g.nodes if n.parent}
    assert inner == {"branch/then_branch/neg": "branch", "branch/else_branch/abs": "branch"}
    assert ("x", "branch", "x") in g.edges  # the outer read reaches the If node


@pytest.mark.parametrize(
    ("nodes", "words"),
    [
        ([helper.make_node("Relu", ["nowhere"], ["y"], name="r")], "node 'r' reads 'nowhere'"),
        (
            [
                helper.make_node("Relu", ["b"], ["a"], name="first"),
                helper.make_node("Relu", ["a"], ["b"], name="second"),
            ],
            "node 'first' reads 'b', produced only further down",
        ),
    ],
)
def test_an_invalid_graph_is_one_line_naming_the_node(
    nodes: list[onnx.NodeProto], words: str
) -> None:
    with pytest.raises(ModelError) as err:
        model_graph(_model(nodes))
    assert words in str(err.value) and "\n" not in str(err.value)


def test_unknown_shapes_stay_unknown_never_zero() -> None:
    m = _model([helper.make_node("Relu", ["x"], ["y"])])
    g = model_graph(m, inferred(m, {}))
    assert g.tensors["x"].nbytes == 32
    m2 = _model([helper.make_node("NonZero", ["x"], ["y"])])
    g2 = model_graph(m2, inferred(m2, {}))
    assert g2.tensors["y"].nbytes is None and g2.tensors["y"].text().endswith("[?]")


def test_the_layout_is_layered_cached_and_a_bad_cache_file_is_laid_out_again(
    tmp_path: Path,
) -> None:
    boxes = [Box("a", "Conv"), Box("b", "Relu"), Box("c", "Add"), Box("d", "Relu")]
    edges = [("a", "b"), ("a", "c"), ("b", "c"), ("c", "d")]
    first = lay_out(boxes, edges, tmp_path)
    ys = {k: v[1] for k, v in first.boxes.items()}
    assert ys["a"] < ys["b"] < ys["c"] < ys["d"]  # top to bottom, in dependency order
    assert not first.cached and len(first.edges) == 4
    again = lay_out(boxes, edges, tmp_path)
    assert again.cached and again.boxes == first.boxes
    (cached,) = tmp_path.glob("*.json")
    cached.write_text('{"boxes": {"zz": [0, 0, 1, 1]}, "edges": [["a", "b", []]]}')
    third = lay_out(boxes, edges, tmp_path)
    assert not third.cached and third.boxes == first.boxes


def test_collapse_joins_a_blocks_edges() -> None:
    boxes = [Box(n, "Op") for n in "abcde"]
    edges = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e")]
    out, joined, made = collapse(boxes, edges, [("layer 0", ["b", "c"]), ("layer 1", ["d"])])
    assert [b.name for b in out] == ["a", "[layer 0]", "[layer 1]", "e"]
    assert joined == [("a", "[layer 0]"), ("[layer 0]", "[layer 1]"), ("[layer 1]", "e")]
    assert made[0].members == ("b", "c")


def test_precision_labels_int8_qdq_kept_and_float() -> None:
    from engine.model.graph_view import GraphNode, Tensor

    nodes = [
        GraphNode("q", "QuantizeLinear", (), ("t1",)),
        GraphNode("c", "QLinearConv", (), ("t2",)),
        GraphNode("m", "MatMul", (), ("t3",)),
        GraphNode("s", "Shape", (), ("t4",)),
        GraphNode("h", "Add", (), ("t5",)),
        GraphNode("u", "Foo", (), ("t6",)),
    ]
    tensors = {
        "t3": Tensor("float32", (1,)),
        "t4": Tensor("int64", (1,)),
        "t5": Tensor("float16", (1,)),
    }
    got = precisions(nodes, tensors, kept_fp32=["orig_m"], origins={"m": ["orig_m"]})
    assert got == {
        "q": "Q/DQ",
        "c": "INT8",
        "m": "FP32 kept",
        "s": "other",
        "h": "FP16",
        "u": "unknown",
    }


def test_the_job_draws_the_demo_transformer_as_loaded_and_as_run_with_its_fusions() -> None:
    r = drive(graph_job(GraphRequest(Workload(str(DEMO_TRANSFORMER)))), lambda _: None)
    loaded, run = r["views"]["loaded"], r["views"]["run"]
    assert len(run["nodes"]) < len(loaded["nodes"])  # fusion took nodes away
    assert loaded["layout"] and run["layout"]
    names = {n["name"] for n in loaded["nodes"]}
    fused = {k: v for k, v in r["fused"].items() if v}
    assert fused and all(set(v) <= names for v in fused.values())
    run_ops = {n["name"]: n["op"] for n in run["nodes"]}
    assert {"LayerNormalization", "SkipLayerNormalization"} & {run_ops[k] for k in fused}
    assert r["provider_used"] == "CPUExecutionProvider"
    # every run node has a precision; the tensors as run carry the shapes the profile saw
    assert set(run["precision"]) == set(run_ops)
    assert any(shape for _dtype, shape in run["tensors"].values())
    json.dumps(r)  # plain data, for the window and --json


def test_a_graph_over_the_node_limit_opens_collapsed_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import engine.run.graph_job as graph_job_mod

    monkeypatch.setattr(graph_job_mod, "NODE_LIMIT", 50)
    req = GraphRequest(Workload(str(DEMO_TRANSFORMER)), as_run=False)
    r = drive(graph_job(req), lambda _: None)
    loaded = r["views"]["loaded"]
    assert loaded["layout"] is None and loaded["collapsed"]["layout"]["boxes"]
    assert loaded["note"].startswith("144 nodes, more than 50: opened with repeated blocks")
    assert len(loaded["collapsed"]["blocks"]) == 4  # the demo transformer's 4 layers
    assert "run" not in r["views"]
    full = drive(
        graph_job(GraphRequest(Workload(str(DEMO_TRANSFORMER)), as_run=False, expand=True)),
        lambda _: None,
    )
    assert full["views"]["loaded"]["layout"]["boxes"]
    # the memory timeline of one inference, its peak among the steps
    mem = loaded["memory"]
    assert mem["peak_bytes"] == max(t["bytes"] for t in mem["timeline"]) > 0


def test_the_job_on_an_int8_variant_marks_the_integer_kernels_and_maps_them_by_name() -> None:
    r = drive(
        graph_job(GraphRequest(Workload(str(DEMO_CNN), RunConfig(precision="int8-static")))),
        lambda _: None,
    )
    run = r["views"]["run"]
    assert {"INT8", "Q/DQ"} <= set(run["precision"].values())
    loaded_ops = {n["name"]: n["op"] for n in r["views"]["loaded"]["nodes"]}
    convs = [n["name"] for n in run["nodes"] if n["op"] == "QLinearConv"]
    assert len(convs) == 6
    for c in convs:  # each replaced its Conv and what was folded into it
        ops = [loaded_ops[x] for x in r["fused"][c]]
        assert ops[0] == "Conv" and "BatchNormalization" in ops, (c, ops)
    assert r["removed"] == []  # every loaded node has its counterpart as run


def test_by_name_splits_a_shared_region_and_matches_renamed_tensors() -> None:
    from engine.model.graph_fusion import by_name
    from engine.model.graph_io import NodeIO

    loaded = [
        NodeIO("q/MatMul", "MatMul", ("h",), ("q0",)),
        NodeIO("q/Add", "Add", ("q0",), ("q",)),
        NodeIO("k/MatMul", "MatMul", ("h",), ("k0",)),
        NodeIO("k/Add", "Add", ("k0",), ("k",)),
        NodeIO("conv", "Conv", ("x",), ("c",)),
        NodeIO("bn", "BatchNormalization", ("c",), ("b",)),
        NodeIO("relu", "Relu", ("b",), ("r",)),
    ]
    run = [
        NodeIO("h_quant", "DynamicQuantizeLinear", ("h",), ("hq",)),
        NodeIO("q/MatMul_quant", "MatMulInteger", ("hq",), ("q",)),
        NodeIO("k/MatMul_quant", "MatMulInteger", ("hq",), ("k",)),
        NodeIO("conv_token_1", "QLinearConv", ("xq",), ("conv_out",)),
    ]
    shared = ["q/MatMul", "q/Add", "k/MatMul", "k/Add"]
    origins = {
        "h_quant": shared,
        "q/MatMul_quant": shared,
        "k/MatMul_quant": shared,
        "conv_token_1": [],
    }
    got = by_name(origins, run, loaded)
    assert got["q/MatMul_quant"] == ["q/MatMul", "q/Add"]
    assert got["k/MatMul_quant"] == ["k/MatMul", "k/Add"]
    assert got["h_quant"] == []  # the quantize node claims what no named node took
    assert got["conv_token_1"] == ["conv", "bn", "relu"]


def test_the_cli_prints_the_graph_and_writes_json_and_model_explorer_data(tmp_path: Path) -> None:
    out_json, explorer = tmp_path / "g.json", tmp_path / "me.json"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli.main",
            "graph",
            str(DEMO_TRANSFORMER),
            "--json",
            str(out_json),
            "--explorer",
            str(explorer),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("as loaded") and "fusion" in p.stdout
    assert "Traceback" not in p.stderr
    assert json.loads(out_json.read_text())["graph"]["views"]["run"]["nodes"]
    (graph,) = json.loads(explorer.read_text()).values()
    assert graph["results"] and {r["value"] for r in graph["results"].values()} <= {
        "FP32",
        "other",
        "unknown",
        "FP16",
    }
    bad = subprocess.run(
        [sys.executable, "-m", "engine.cli.main", "graph", str(tmp_path / "x.onnx")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # one line of error, last; before it at most the progress lines of a busy machine
    *before, error = bad.stderr.strip().splitlines()
    assert bad.returncode == 2 and error.startswith("opscope: error: ") and "x.onnx" in error
    assert all(line.startswith("[graph] ") for line in before), bad.stderr
    cyclic = tmp_path / "cycle.onnx"
    onnx.save(
        _model(
            [
                helper.make_node("Relu", ["b"], ["a"], name="first"),
                helper.make_node("Relu", ["a"], ["b"], name="second"),
                helper.make_node("Relu", ["x"], ["y"], name="third"),
            ]
        ),
        str(cyclic),
    )
    bad = subprocess.run(
        [sys.executable, "-m", "engine.cli.main", "graph", str(cyclic)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = bad.stderr.strip()
    assert bad.returncode == 2 and "\n" not in line and str(cyclic) in line
    assert "node 'first' reads 'b', produced only further down" in line


def _stat(name: str, ms: float, share: float, gbps: float | None = 1.0) -> OpStat:
    return OpStat(
        name, "MatMul", "CPUExecutionProvider", 1, ms, ms, ms, share, 1000, gbps, None, None, None
    )


def test_overlays_colour_by_share_stand_in_for_fused_nodes_and_sum_blocks() -> None:
    stats = {"big": _stat("big", 2.0, 0.8), "small": _stat("small", 0.5, 0.2)}
    f = NodeFigures(stats, stand_in={"orig": "big"}, blocks={"[layer 0]": ["big", "small"]})
    p = paint("time share", ["big", "small", "orig", "folded", "[layer 0]"], f)
    assert (
        p.values["big"] == "80.0%" and p.values["orig"] == "80.0%"
    )  # as the node that replaced it
    assert "folded" not in p.colors  # no figure: never painted as zero
    assert p.values["[layer 0]"] == "100.0%"
    assert p.colors["[layer 0]"] == HEAT[-1] and p.colors["big"] != p.colors["small"]
    assert p.legend[0][1] == "0.0%"
    empty = paint("time share", ["big"], NodeFigures({}))
    assert not empty.colors and "no profile yet" in empty.note


def test_the_change_overlay_against_another_run() -> None:
    now = {"a": _stat("a", 1.0, 0.5), "b": _stat("b", 2.0, 0.5), "new": _stat("new", 1.0, 0.1)}
    then = {"a": _stat("a", 2.0, 0.5), "b": _stat("b", 2.05, 0.5), "gone": _stat("gone", 1.0, 0.1)}
    p = paint("change", ["a", "b", "new"], NodeFigures(now, baseline=then, baseline_name="run 1"))
    assert p.colors["a"] == FASTER and p.values["a"] == "0.50x"
    assert p.colors["b"] not in (FASTER, SLOWER)
    assert p.colors["new"] == ONLY and p.values["new"] == "only in this run"
    assert "1 node(s) of run 1 are not in this graph" in p.note
    slower = paint("change", ["a"], NodeFigures({"a": _stat("a", 3.0, 1)}, baseline=then))
    assert slower.colors["a"] == SLOWER


def test_a_cpu_node_in_a_gpu_run_stands_out() -> None:
    gpu = OpStat("g", "MatMul", "CUDAExecutionProvider", 1, 1, 1, 1, 0.5, 1, None, None, None, None)
    cpu = OpStat("c", "Shape", "CPUExecutionProvider", 1, 1, 1, 1, 0.5, 1, None, None, None, None)
    p = paint("provider", ["g", "c"], NodeFigures({"g": gpu, "c": cpu}))
    assert p.colors["c"] == "#e15759" and "fallback" in p.note


def test_the_change_overlay_across_two_graphs_compares_on_the_model_as_loaded() -> None:
    # FP32 ran 'relu_nchwc' for Conv+BN+Relu; INT8 ran 'conv_token_1' for the same nodes
    now = {"conv_token_1": _stat("conv_token_1", 1.0, 0.5)}
    then = {"relu_nchwc": _stat("relu_nchwc", 4.0, 0.5)}
    f = NodeFigures(
        now,
        stand_in={"conv": "conv_token_1", "bn": "conv_token_1", "relu": "conv_token_1"},
        baseline=then,
        baseline_name="run 1",
        baseline_stand_in={"conv": "relu_nchwc", "bn": "relu_nchwc", "relu": "relu_nchwc"},
    )
    p = paint("change", ["conv", "bn", "relu", "shape"], f)
    assert p.values == {"conv": "0.25x", "bn": "0.25x", "relu": "0.25x"}
    assert p.colors["conv"] == FASTER and "shape" not in p.colors and not p.note


def test_an_if_body_is_laid_out_inside_its_node() -> None:
    m = _if_model()
    g = model_graph(m)
    boxes = [Box(n.name, n.op_type, n.parent) for n in g.nodes]
    placed = lay_out(boxes, [(s, d) for s, d, _ in g.edges])
    bx, by, bw, bh = placed.boxes["branch"]
    for inner in ("branch/then_branch/neg", "branch/else_branch/abs"):
        x, y, w, h = placed.boxes[inner]
        assert bx <= x and x + w <= bx + bw and by <= y and y + h <= by + bh, inner
