"""The Model Explorer export: the custom-node-data JSON format and the node ids the
model-explorer-onnx adapter gives (engine/model/model_explorer.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from engine.model.model_explorer import (
    explorer_graph_id,
    explorer_node_id,
    node_data,
    node_ids,
    opscope_name,
    write_node_data,
)

GRAPH_KEYS = {
    "name",
    "results",
    "thresholds",
    "gradient",
    "hideInAggregatedStatsTable",
    "hideInChildrenStatsTable",
    "hideAggregatedStats",
    "showExpandedSummaryOnGroupNode",
    "showLabelCountColumnsInChildrenStatsTable",
}  # GraphNodeData's fields (model_explorer/node_data_builder.py)


def tiny_model(graph_name: str = "main_graph") -> onnx.ModelProto:
    """x -> MatMul(named) -> Relu(unnamed) -> Add(named "node") -> Sigmoid(unnamed)
    -> Abs(named "mm", a repeat) -> y."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], [0.0] * 16)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["a"], name="mm"),
        helper.make_node("Relu", ["a"], ["b"]),
        helper.make_node("Add", ["b", "b"], ["c"], name="node"),
        helper.make_node("Sigmoid", ["c"], ["d"]),
        helper.make_node("Abs", ["d"], ["y"], name="mm"),
    ]
    graph = helper.make_graph(nodes, graph_name, [x], [y], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def if_model() -> onnx.ModelProto:
    """Unnamed nodes before, inside (two in each branch) and after an If."""
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])

    def branch(op: str, out: str) -> onnx.GraphProto:
        o = helper.make_tensor_value_info(out, TensorProto.FLOAT, [2])
        inner = [helper.make_node(op, ["a"], [out + "0"]), helper.make_node(op, [out + "0"], [out])]
        return helper.make_graph(inner, f"g_{op}", [], [o])

    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node(
            "If", ["cond"], ["b"], then_branch=branch("Neg", "t"), else_branch=branch("Abs", "e")
        ),
        helper.make_node("Sigmoid", ["b"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "g", [cond, x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_node_ids_follow_the_adapter() -> None:
    ids = node_ids(tiny_model())
    assert ids == {
        "mm": "mm",  # a named node keeps its name
        "Relu_1": "node",  # unnamed nodes: "node", "node_1", ...
        "node": "node_1",  # ... which can push a node really named "node" along
        "Sigmoid_3": "node_2",
    }  # the second "mm" is also OpScope's "mm": the first one wins its key
    assert node_ids(tiny_model()) == ids  # stable
    legacy = node_ids(tiny_model(), legacy=True)
    assert legacy["Relu_1"] == "<node_1>" and legacy["Sigmoid_3"] == "<node_3>"
    assert explorer_node_id("conv1", "Conv", 0) == "conv1"
    assert explorer_node_id(None, "Relu", 4) == explorer_node_id("", "Relu", 4) == "<node_4>"
    assert opscope_name("", "Relu", 4) == "Relu_4" and opscope_name("r", "Relu", 4) == "r"
    assert explorer_graph_id(tiny_model()) == "main_graph"


def test_subgraphs_count_toward_the_main_graphs_ids() -> None:
    ids = node_ids(if_model())
    # each branch names its two nodes in a scope of its own ("node", then "node_2", then
    # "node", "node_3": the count is shared), which moves the main graph's next unnamed
    # node on to "node_4"
    assert ids == {"Relu_0": "node", "If_1": "node_1", "Sigmoid_2": "node_4"}


def test_node_ids_match_onnx_ir_name_fix_pass() -> None:
    ir = pytest.importorskip("onnx_ir")
    from onnx_ir.passes.common import NameFixPass

    for model in (tiny_model(), if_model()):
        irm = ir.serde.deserialize_model(model)
        NameFixPass()(irm)
        theirs: dict[str, str] = {}
        for i, (node, named) in enumerate(zip(model.graph.node, irm.graph, strict=True)):
            theirs.setdefault(opscope_name(node.name, node.op_type, i), named.name)
        assert node_ids(model) == theirs


def test_numbers_get_a_gradient_and_unknowns_are_left_out() -> None:
    ids = node_ids(tiny_model())
    shares = {"mm": 60.0, "Relu_1": 10.0, "node": None, "Sigmoid_3": math.nan}
    data = node_data(
        {ids[k]: v for k, v in shares.items()}, graph_id="main_graph", name="time share %"
    )
    assert list(data) == ["main_graph"]
    graph = data["main_graph"]
    assert set(graph) <= GRAPH_KEYS and set(graph) == {"name", "results", "gradient"}
    assert graph["results"] == {"mm": {"value": 60.0}, "node": {"value": 10.0}}
    stops = graph["gradient"]
    assert [s["stop"] for s in stops] == [0, 0.5, 1]
    assert all(set(s) == {"stop", "bgColor"} for s in stops)
    assert stops[0]["bgColor"] != stops[-1]["bgColor"]
    better = node_data({"a": 1.0, "b": 2.0}, graph_id="g", higher_is_worse=False)
    assert better["g"]["gradient"][0]["bgColor"] == stops[-1]["bgColor"]  # reversed


def test_a_change_gets_a_neutral_stop_at_zero() -> None:
    data = node_data({"a": -10.0, "b": 30.0, "c": math.inf}, graph_id="g")
    stops = data["g"]["gradient"]
    assert [s["stop"] for s in stops] == [0, 0.25, 1]
    assert data["g"]["results"] == {"a": {"value": -10.0}, "b": {"value": 30.0}}


def test_equal_numbers_or_none_get_no_gradient() -> None:
    assert node_data({"a": 5.0, "b": 5.0}, graph_id="g") == {
        "g": {"results": {"a": {"value": 5.0}, "b": {"value": 5.0}}}
    }
    assert node_data({"a": None}, graph_id="g") == {"g": {"results": {}}}


def test_labels_are_strings_each_with_its_own_colour() -> None:
    data = node_data(
        {"a": "INT8", "b": "FP32", "c": "INT8", "d": None, "e": ""},
        graph_id="g",
        colors={"FP32": "#123456"},
    )
    results = data["g"]["results"]
    assert set(results) == {"a", "b", "c"}
    assert results["b"] == {"value": "FP32", "bgColor": "#123456"}
    assert results["a"]["value"] == "INT8" and results["a"] == results["c"]
    assert results["a"]["bgColor"] != "#123456"
    assert "gradient" not in data["g"]  # colours come from each result
    many = node_data({str(i): f"L{i:02d}" for i in range(14)}, graph_id="g")["g"]["results"]
    assert len({r["bgColor"] for r in many.values()}) == 14


def test_written_file_is_strict_json(tmp_path: Path) -> None:
    data = node_data({"mm": 3.0, "node": 1.0, "x": "FP16"}, graph_id="main_graph")
    data["main_graph"]["results"]["bad"] = {"value": math.nan}  # a hand-made entry
    path = tmp_path / "overlay.json"
    write_node_data(path, data)
    text = path.read_text(encoding="utf-8")
    assert "NaN" not in text
    back = json.loads(text)
    assert set(back["main_graph"]["results"]) == {"mm", "node", "x"}
    assert back["main_graph"]["gradient"] == data["main_graph"]["gradient"]
    write_node_data(str(path), node_data({}, graph_id="g"))  # replaced in place
    assert json.loads(path.read_text(encoding="utf-8")) == {"g": {"results": {}}}
