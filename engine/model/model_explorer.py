"""OpScope's per-node numbers as custom node data for Google's Model Explorer, so a model
loaded there (ONNX, through the model-explorer-onnx adapter) shows our overlays: time share,
GB/s, precision, the change between two runs... Our own code writes the format: no
dependency on the model-explorer packages.

The format (github.com/google-ai-edge/model-explorer at c0f8dbac, "Custom node data" in
https://github.com/google-ai-edge/model-explorer/wiki/2.-User-Guide#custom-node-data):
src/server/package/src/model_explorer/node_data_builder.py (ModelNodeData, GraphNodeData,
NodeDataResult, ThresholdItem, GradientItem) and src/ui/src/components/visualizer/common/
types.ts (NodeDataProviderGraphData, NodeDataProviderResultData):

    {graph id: {"name"?: str,
                "results": {node id: {"value": number | str, "bgColor"?: css, "textColor"?: css}},
                "thresholds"?: [{"value": number, "bgColor": css, "textColor"?: css}],
                "gradient"?: [{"stop": 0..1, "bgColor"?: css, "textColor"?: css}]}}

The UI (node_data_provider_extension_service.ts, processNodeDataProviderDataForGraph)
colours numbers only, from the gradient over min..max of the numbers (it takes precedence
over thresholds; all-equal numbers get no colour). A string value is shown as it is, with
its own bgColor; the group-node summary groups nodes by that colour, so each label gets one
(Google's example_colabs/custom_data_overlay_demo.ipynb writes string values the same way).

Ids (github.com/justinchuby/model-explorer-onnx 0.4.2 at 41c34abc, src/model_explorer_onnx/
main.py create_graph/create_node, _passes.py process_model): the graph id is graph.name,
the node id node.name after onnx_ir's NameFixPass (onnx_ir/passes/common/naming.py), which
names unnamed nodes "node", "node_1", ... and renames a repeated name "x" to "x_1", counting
across the whole model (subgraphs included). Adapters before 0.4.0 named an unnamed node
f"<node_{index}>" and kept repeated names.
"""

from __future__ import annotations

import colorsys
import json
import math
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.files import write_atomic

if TYPE_CHECKING:
    import onnx

GOOD, MIDDLE, BAD, NEUTRAL = "#1a9850", "#fee08b", "#d73027", "#f7f7f7"
# Tableau 10: labels past these get evenly spread hues
LABEL_COLORS = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#e15759",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)


def opscope_name(name: str | None, op_type: str, index: int) -> str:
    """OpScope's name for a node: its own, or `<OpType>_<index>` (index in graph.node)."""
    return name or f"{op_type}_{index}"


def explorer_graph_id(model: onnx.ModelProto) -> str:
    """The id Model Explorer gives the main graph: its name ("" when it has none)."""
    return model.graph.name


def explorer_node_id(name: str | None, op_type: str, index: int) -> str:
    """The node's id in model-explorer-onnx before 0.4.0 only: its name, or `<node_{index}>`.
    Current adapters name an unnamed node from the whole model: use `node_ids(model)`."""
    return name or f"<node_{index}>"


def node_ids(model: onnx.ModelProto, *, legacy: bool = False) -> dict[str, str]:
    """OpScope's name (`opscope_name`) -> Model Explorer's id, for the main graph's nodes.
    Repeats onnx_ir's NameFixPass as model-explorer-onnx >= 0.4.0 runs it (`legacy`: the
    `<node_{index}>` ids of older adapters)."""
    import onnx

    taken: Counter[str] = Counter()  # one count per base name, shared by every graph

    def unique(base: str, used: set[str]) -> str:
        ident = base
        while ident in used:
            taken[base] += 1
            ident = f"{base}_{taken[base]}"
        used.add(ident)
        return ident

    def walk(graph: onnx.GraphProto, out: dict[str, str] | None) -> None:
        used: set[str] = set()  # node names are unique per graph
        for index, node in enumerate(graph.node):
            if legacy:
                ident = explorer_node_id(node.name, node.op_type, index)
            else:  # a free name is kept, an empty or taken one numbered
                ident = unique(node.name or "node", used)
            if out is not None:  # a repeated name: OpScope's key is the first node's
                out.setdefault(opscope_name(node.name, node.op_type, index), ident)
            for attr in node.attribute:  # depth first, right after the node
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g, None)
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    for sub in attr.graphs:
                        walk(sub, None)

    ids: dict[str, str] = {}
    walk(model.graph, ids)
    return ids


def _label_colors(labels: list[str], colors: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for i, label in enumerate(labels):
        if label in colors:
            out[label] = colors[label]
        elif i < len(LABEL_COLORS):
            out[label] = LABEL_COLORS[i]
        else:
            r, g, b = colorsys.hsv_to_rgb((i * 0.618034) % 1.0, 0.55, 0.85)
            out[label] = f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"
    return out


def _gradient(low: float, high: float, higher_is_worse: bool) -> list[dict[str, Any]]:
    """Stops over low..high: good to bad; through a neutral colour at 0 when both signs
    occur (a change between two runs)."""
    start, end = (GOOD, BAD) if higher_is_worse else (BAD, GOOD)
    if low < 0 < high:
        middle, stop = NEUTRAL, -low / (high - low)
    else:
        middle, stop = MIDDLE, 0.5
    return [
        {"stop": 0, "bgColor": start},
        {"stop": round(stop, 6), "bgColor": middle},
        {"stop": 1, "bgColor": end},
    ]


def _number(value: object) -> float | None:
    """A finite number, or None (not a number, NaN, infinite)."""
    if isinstance(value, str) or value is None:
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def node_data(
    values: Mapping[str, float | str | None],
    *,
    graph_id: str,
    higher_is_worse: bool = True,
    colors: Mapping[str, str] | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """One overlay: `values` by Model Explorer node id (see `node_ids`) -> the JSON dict.

    Numbers get a gradient (good -> bad over their range, `higher_is_worse` saying which
    end is bad); strings (precision labels) are written as they are, each label with its
    own bgColor (`colors`: label -> CSS colour, else a fixed palette in label order).
    None, empty labels, NaN and infinities are left out, never written as 0."""
    labels = sorted({v for v in values.values() if isinstance(v, str) and v})
    label_color = _label_colors(labels, colors or {})
    results: dict[str, dict[str, Any]] = {}
    numbers: list[float] = []
    for node_id, value in values.items():
        if isinstance(value, str):
            if value:
                results[node_id] = {"value": value, "bgColor": label_color[value]}
        elif (number := _number(value)) is not None:
            results[node_id] = {"value": number}
            numbers.append(number)
    graph: dict[str, Any] = {"results": results}
    if name:
        graph["name"] = name
    if numbers and min(numbers) < max(numbers):
        graph["gradient"] = _gradient(min(numbers), max(numbers), higher_is_worse)
    return {graph_id: graph}


def _valid(result: object) -> bool:
    if not isinstance(result, Mapping):
        return False
    value = result.get("value")
    return (isinstance(value, str) and value != "") or _number(value) is not None


def write_node_data(path: str | Path, data: dict[str, Any]) -> None:
    """Write an overlay (from `node_data`) as strict JSON, atomically. Results without a
    finite number or a label are dropped, never written."""
    clean: dict[str, Any] = {}
    for graph_id, graph in data.items():
        if isinstance(graph, Mapping) and isinstance(graph.get("results"), Mapping):
            results = {k: r for k, r in graph["results"].items() if _valid(r)}
            graph = {**graph, "results": results}
        clean[graph_id] = graph
    text = json.dumps(clean, indent=2, allow_nan=False)
    write_atomic(path, lambda fh: fh.write(text + "\n"))


def export_overlay(
    model_path: str,
    values: Mapping[str, float | str | None],
    name: str,
    path: str | Path,
    higher_is_worse: bool = True,
) -> int:
    """`values` by OpScope node name, on the model file `model_path`'s nodes, written to
    `path` as Model Explorer node data; returns how many nodes carry a value."""
    import onnx

    from engine.errors import ModelError, one_line

    try:
        model = onnx.load(str(model_path), load_external_data=False)
    except Exception as exc:
        raise ModelError(f"cannot read it ({one_line(exc)})", model_path) from exc
    ids = node_ids(model)
    keyed = {ids[k]: v for k, v in values.items() if k in ids}
    data = node_data(
        keyed, graph_id=explorer_graph_id(model), name=name, higher_is_worse=higher_is_worse
    )
    write_node_data(path, data)
    return len(next(iter(data.values()))["results"])
