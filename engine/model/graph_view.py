"""A model's graph as the graph view draws it (issue #26): every node with its attributes,
the tensors it reads and writes with their dtypes and shapes, the edges between nodes, the
graph's inputs and outputs as nodes of their own, and the nodes of If, Loop and Scan bodies
expanded in place (each names the node whose body holds it). Weights are not nodes: a node
lists the weights it reads.

Read from ONNX alone, Qt-free. An invalid graph (a node reading a tensor nothing produces,
or one produced only further down: a cycle) is refused in one line naming the node; a
tensor whose shape inference cannot tell is marked unknown, never given a size of zero."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.errors import ModelError
from engine.model.graph_io import fresh_name
from engine.model.graph_io import outer_reads as body_reads
from engine.model.sizes import as_bytes

if TYPE_CHECKING:
    import onnx

    from engine.model.memory_need import Refine

INPUT, OUTPUT = "Input", "Output"  # the op type of the graph's inputs and outputs as nodes
ATTR_TEXT = 60  # an attribute's value is cut to this many characters


@dataclass(frozen=True)
class Tensor:
    dtype: str  # 'float32', 'int8', '?' when unknown
    shape: tuple[int | str, ...] | None  # None when unknown; a str is a symbolic dim

    @property
    def nbytes(self) -> float | None:
        if self.shape is None or any(isinstance(d, str) for d in self.shape):
            return None
        item = _ITEM.get(self.dtype)
        return None if item is None else as_bytes(math.prod(int(d) for d in self.shape)) * item

    def text(self) -> str:
        dims = "?" if self.shape is None else "x".join(str(d) for d in self.shape) or "scalar"
        return f"{self.dtype}[{dims}]"


_ITEM = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float64": 8,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "bool": 1,
}


@dataclass(frozen=True)
class GraphNode:
    name: str  # unique; an unnamed node is '<OpType>_<index>', as ONNX Runtime names it
    op_type: str
    inputs: tuple[str, ...]  # activations read (weights apart), subgraph reads included
    outputs: tuple[str, ...]
    weights: tuple[str, ...] = ()
    attrs: tuple[tuple[str, str], ...] = ()  # (name, short text)
    parent: str | None = None  # the If/Loop/Scan node whose body holds this one
    domain: str = ""


@dataclass
class ModelGraph:
    nodes: list[GraphNode]
    edges: list[tuple[str, str, str]]  # (producer, consumer, tensor)
    tensors: dict[str, Tensor] = field(default_factory=dict)

    def node(self, name: str) -> GraphNode | None:
        return self.by_name.get(name)

    @property
    def by_name(self) -> dict[str, GraphNode]:
        return {n.name: n for n in self.nodes}

    @property
    def op_count(self) -> int:
        return sum(1 for n in self.nodes if n.op_type not in (INPUT, OUTPUT))


def model_graph(model: onnx.ModelProto, tensors: dict[str, Tensor] | None = None) -> ModelGraph:
    """The graph view's graph of `model` (`tensors`: dtypes and shapes known, e.g. from
    shape inference at the run's shapes; read from the model's declarations otherwise)."""
    g = model.graph
    weights = {t.name for t in g.initializer}
    facts = dict(tensors) if tensors is not None else declared(model)
    for t in g.initializer:
        facts.setdefault(t.name, Tensor(_dtype_name(t.data_type), tuple(t.dims)))
    nodes: list[GraphNode] = []
    edges: list[tuple[str, str, str]] = []
    producer: dict[str, str] = {}
    taken: set[str] = set()  # every box's name, made unique (graph_io.fresh_name)
    for v in g.input:
        if v.name not in weights and v.name not in taken:
            taken.add(v.name)
            nodes.append(GraphNode(v.name, INPUT, (), (v.name,)))
            producer[v.name] = v.name
    _add_scope(g, None, "", nodes, edges, producer, weights, set(), facts, taken)
    for o in g.output:
        if o.name not in producer:
            raise ModelError(f"graph output {o.name!r} is produced by no node")
        out_name = o.name if o.name not in taken else fresh_name(f"{o.name} (output)", taken)
        taken.add(out_name)
        nodes.append(GraphNode(out_name, OUTPUT, (o.name,), ()))
        edges.append((producer[o.name], out_name, o.name))
    return ModelGraph(nodes, edges, facts)


def _add_scope(
    g: onnx.GraphProto,
    parent: str | None,
    prefix: str,
    nodes: list[GraphNode],
    edges: list[tuple[str, str, str]],
    producer: dict[str, str],
    weights: set[str],
    outer_local: set[str],
    facts: dict[str, Tensor],
    taken: set[str],
) -> None:
    """One graph's nodes (a body's, under `parent`), checked in order: every tensor read is
    produced above it, a graph input, a weight, or (in a body) a tensor of an outer scope."""
    from onnx import AttributeProto

    later = {o for n in g.node for o in n.output if o}
    local = set(outer_local)
    local_weights = weights | {t.name for t in g.initializer}
    if parent is not None:
        for v in g.input:
            local.add(v.name)
    for i, node in enumerate(g.node):
        name = fresh_name(prefix + (node.name or f"{node.op_type}_{i}"), taken)
        reads, wts = [], []
        for t in node.input:
            if not t:
                continue
            if t in local_weights:
                wts.append(t)
            elif t in producer or t in local:
                reads.append(t)
            elif t in later:
                raise ModelError(
                    f"node {name!r} reads {t!r}, produced only further down "
                    "(a cycle, or nodes out of topological order)"
                )
            else:
                raise ModelError(
                    f"node {name!r} reads {t!r}, which no node, input or weight provides"
                )
        attrs = []
        bodies = []
        for a in node.attribute:
            if a.type == AttributeProto.GRAPH:
                bodies.append((a.name, a.g))
            elif a.type == AttributeProto.GRAPHS:
                bodies += [(f"{a.name}{k}", sub) for k, sub in enumerate(a.graphs)]
            else:
                attrs.append((a.name, _attr_text(a)))
        outer_reads = list(dict.fromkeys(body_reads([b for _, b in bodies])))
        for t in outer_reads:
            if t not in reads and t in producer:
                reads.append(t)
        gn = GraphNode(
            name,
            node.op_type,
            tuple(dict.fromkeys(reads)),
            tuple(o for o in node.output if o),
            tuple(wts),
            tuple(attrs),
            parent,
            node.domain,
        )
        nodes.append(gn)
        for t in gn.inputs:
            if t in producer:
                edges.append((producer[t], name, t))
        for body_name, body in bodies:
            _add_scope(
                body,
                name,
                f"{name}/{body_name}/",
                nodes,
                edges,
                producer,
                local_weights,
                local | set(producer),
                facts,
                taken,
            )
        for o in gn.outputs:
            producer[o] = name
            local.add(o)


def _attr_text(a: onnx.AttributeProto) -> str:
    from onnx import helper

    try:
        value = helper.get_attribute_value(a)
    except Exception:
        return "?"
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    elif hasattr(value, "dims"):  # a tensor
        value = f"tensor {_dtype_name(value.data_type)}{list(value.dims)}"
    text = str(value).replace("\n", " ")
    return text if len(text) <= ATTR_TEXT else text[: ATTR_TEXT - 1] + "…"


def _dtype_name(elem_type: int) -> str:
    from onnx import helper

    try:
        return str(helper.tensor_dtype_to_np_dtype(elem_type).name)
    except (KeyError, TypeError, ValueError):
        return "?"


def declared(model: onnx.ModelProto) -> dict[str, Tensor]:
    """The dtype and shape of every tensor the model (or its shape inference) declares."""
    out: dict[str, Tensor] = {}

    def walk(g: onnx.GraphProto) -> None:
        for v in (*g.input, *g.value_info, *g.output):
            if not v.type.HasField("tensor_type"):
                continue
            t = v.type.tensor_type
            shape: tuple[int | str, ...] | None = None
            if t.HasField("shape"):
                shape = tuple(
                    d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                    for d in t.shape.dim
                )
            out[v.name] = Tensor(_dtype_name(t.elem_type), shape)
        for n in g.node:
            for a in n.attribute:
                for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    walk(sub)

    walk(model.graph)
    return out


def inferred(
    model: onnx.ModelProto,
    shapes: dict[str, tuple[int, ...]],
    refine: Refine | None = None,
) -> dict[str, Tensor]:
    """Dtypes and shapes at input `shapes` from ONNX shape inference, then `refine` (a
    backend's symbolic inference, engine/backends' shape_inference) where it tells more;
    what neither can tell stays unknown (the model's own declarations where both fail)."""
    from engine.model.memory_need import inferred_at

    plain, better = inferred_at(model, shapes, refine)
    out = declared(model)
    if plain is not None:
        out.update(declared(plain))
    if better is not None:
        out.update((k, t) for k, t in declared(better).items() if _concrete(t) or k not in out)
    return out


def _concrete(t: Tensor | None) -> bool:
    return t is not None and t.shape is not None and all(isinstance(d, int) for d in t.shape)
