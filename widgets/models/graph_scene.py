"""The graph job's result (engine/run/graph_job.py) as the graph view draws it, Qt-free:
one view (as loaded or as run, in full or collapsed) as boxes and routed edges, each box
with the facts its tooltip shows; which loaded nodes each run node replaced, both ways; and
search by name or op type."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.api import OpStat, Tensor


@dataclass(frozen=True)
class Node:
    name: str
    op: str  # op type, 'Input', 'Output' or 'Block'
    rect: tuple[float, float, float, float]  # x, y, w, h
    label: str
    parent: str | None = None
    container: bool = False  # an If/Loop/Scan whose body is drawn inside it
    members: tuple[str, ...] = ()  # a collapsed block's nodes


@dataclass
class Scene:
    kind: str  # 'run' or 'loaded'
    collapsed: bool
    nodes: list[Node]
    edges: list[tuple[str, str, list[tuple[float, float]]]]
    bounds: tuple[float, float, float, float]
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> its job record
    tensors: dict[str, tuple[str, list[int | str] | None]] = field(default_factory=dict)
    note: str = ""

    def names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def find(self, text: str) -> list[str]:
        """Nodes whose name or op type holds `text` (case-insensitive), in draw order."""
        t = text.strip().lower()
        if not t:
            return []
        return [n.name for n in self.nodes if t in n.name.lower() or t in n.op.lower()]

    def block_of(self, name: str) -> str | None:
        return next((n.name for n in self.nodes if name in n.members), None)


def scene_from(result: Mapping[str, Any], kind: str, collapsed: bool) -> Scene | None:
    """One view of the job's result; None when the job did not draw it (no graph as run,
    or no layout of that form)."""
    view = (result.get("views") or {}).get(kind)
    if not view:
        return None
    part = view.get("collapsed") if collapsed else None
    layout = part["layout"] if part else view.get("layout")
    if layout is None:
        return None
    facts = {n["name"]: n for n in view["nodes"]}
    blocks = (part or {}).get("blocks") or {}
    parents = {n["parent"] for n in view["nodes"] if n.get("parent")}
    nodes = []
    for name, rect in layout["boxes"].items():
        block = blocks.get(name)
        if block is not None:
            nodes.append(
                Node(
                    name,
                    "Block",
                    tuple(rect),
                    f"{block['label']}",
                    members=tuple(block["members"]),
                )
            )
            continue
        f = facts.get(name, {})
        op = str(f.get("op", "?"))
        label = name if op in ("Input", "Output") else op
        nodes.append(
            Node(
                name,
                op,
                tuple(rect),
                label,
                f.get("parent"),
                container=name in parents,
            )
        )
    nodes.sort(key=lambda n: (not n.container, n.parent is not None))  # containers first
    edges = [(s, d, [tuple(p) for p in pts]) for s, d, pts in layout["edges"]]
    return Scene(
        kind,
        collapsed,
        nodes,
        edges,
        tuple(layout["bounds"]),
        facts,
        {k: (v[0], v[1]) for k, v in view.get("tensors", {}).items()},
        view.get("note", ""),
    )


def replaced_by(result: Mapping[str, Any]) -> dict[str, str]:
    """Loaded node -> the run node that replaced it (fusion)."""
    out: dict[str, str] = {}
    for run_node, origins in (result.get("fused") or {}).items():
        for o in origins:
            out.setdefault(o, run_node)
    return out


def out_bytes(scene: Scene) -> dict[str, float | None]:
    """Each node's output activation bytes; None where a shape is unknown."""
    return output_bytes(scene.facts, scene.tensors)


def output_bytes(
    facts: Mapping[str, Mapping[str, Any]],
    tensors: Mapping[str, tuple[str, list[int | str] | None]],
) -> dict[str, float | None]:
    """Each node's output activation bytes (None where a shape is unknown)."""
    return _summed(facts, tensors, "outputs")


def weight_bytes(
    facts: Mapping[str, Mapping[str, Any]],
    tensors: Mapping[str, tuple[str, list[int | str] | None]],
) -> dict[str, float | None]:
    """Each node's weights, in bytes (None where a weight's size is unknown): what it holds,
    which an embedding gather reads only a few rows of."""
    return _summed(facts, tensors, "weights")


def _summed(
    facts: Mapping[str, Mapping[str, Any]],
    tensors: Mapping[str, tuple[str, list[int | str] | None]],
    key: str,
) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, f in facts.items():
        sizes = [_nbytes(tensors.get(t)) for t in f.get(key, [])]
        out[name] = None if None in sizes else sum(b or 0.0 for b in sizes)
    return out


def _nbytes(t: tuple[str, list[int | str] | None] | None) -> float | None:
    if t is None or t[1] is None:
        return None
    return Tensor(t[0], tuple(t[1])).nbytes


def tip(
    scene: Scene,
    name: str,
    stat: OpStat | None,
    fused: list[str],
    stand_in: str | None,
    value: str = "",
) -> str:
    """Hover text: op type and name, inputs and outputs with dtypes and shapes, weights,
    attributes, its time over the profiled inferences, what it replaced."""
    node = next((n for n in scene.nodes if n.name == name), None)
    if node is not None and node.op == "Block":
        return (
            f"{node.label}: {len(node.members)} nodes collapsed (one repetition of a "
            f"repeated block){'; ' + value if value else ''}"
        )
    f = scene.facts.get(name, {})
    lines = [f"{f.get('op', '?')}  {name}"]

    def tensor(t: str) -> str:
        dtype, shape = scene.tensors.get(t, ("?", None))
        dims = "?" if shape is None else "x".join(str(d) for d in shape) or "scalar"
        return f"{t}: {dtype}[{dims}]"

    lines += [f"in   {tensor(t)}" for t in f.get("inputs", [])[:8]]
    lines += [f"out  {tensor(t)}" for t in f.get("outputs", [])[:8]]
    if f.get("weights"):
        ws = f["weights"]
        lines.append(
            f"weights {', '.join(tensor(t) for t in ws[:4])}"
            + (f" (+{len(ws) - 4})" if len(ws) > 4 else "")
        )
    lines += [f"{k} = {v}" for k, v in f.get("attrs", [])[:10]]
    if stat is not None:
        who = f" (as {stand_in}, which replaced it)" if stand_in and stand_in != name else ""
        provider = stat.provider.removesuffix("ExecutionProvider")
        lines.append(
            f"time {stat.time_ms:.4g} ms per inference, {stat.share:.1%} of node "
            f"time, p99 {stat.p99_ms:.4g} ms{who}; {provider}"
        )
    elif scene.kind == "loaded" and stand_in is None and f.get("op") not in ("Input", "Output"):
        lines.append(
            "no counterpart as run: folded into constants, removed, rewritten under "
            "new tensor names (INT8's), or not profiled yet"
        )
    if fused:
        shown = ", ".join(fused[:6]) + (f" (+{len(fused) - 6})" if len(fused) > 6 else "")
        lines.append(f"replaced {len(fused)} loaded node(s): {shown}")
    if value:
        lines.append(value)
    return "\n".join(lines)
