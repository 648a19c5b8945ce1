"""A model's graph as the liveness pass reads it (engine/measure/liveness.py): each node in
file order (ONNX requires a topological one) with the tensors it reads and writes, control
flow's subgraphs contributing the outer-scope tensors they read; and its weights by dtype.
Unnamed nodes get stable names (`<OpType>_<index>`, as ONNX Runtime names them); a name
that an input or an earlier node already has (a hostile or careless exporter's duplicates)
gets ` (2)`, ` (3)`... so that every node is one box, one key (`fresh_name`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx


@dataclass(frozen=True)
class NodeIO:
    name: str
    op_type: str
    inputs: tuple[str, ...]  # tensor names read (subgraphs' outer-scope reads included)
    outputs: tuple[str, ...]


def graph_nodes(graph: onnx.GraphProto) -> list[NodeIO]:
    out = []
    weights = {t.name for t in graph.initializer}
    taken = {v.name for v in graph.input if v.name not in weights}
    for i, node in enumerate(graph.node):
        reads = [*node.input, *_outer_reads(node)]
        name = fresh_name(node.name or f"{node.op_type}_{i}", taken)
        out.append(NodeIO(name, node.op_type, tuple(dict.fromkeys(reads)),
                          tuple(node.output)))  # fmt: skip
    return out


def fresh_name(name: str, taken: set[str]) -> str:
    """`name`, or `name (2)`, `name (3)`... the first that `taken` lacks; added to it."""
    out, k = name, 1
    while out in taken:
        k += 1
        out = f"{name} ({k})"
    taken.add(out)
    return out


def _outer_reads(node: onnx.NodeProto) -> list[str]:
    """Tensors a node's subgraphs (If, Loop, Scan bodies) read from the enclosing scope."""
    from onnx import AttributeProto

    subs = []
    for attr in node.attribute:
        subs += ([attr.g] if attr.type == AttributeProto.GRAPH else
                 list(attr.graphs) if attr.type == AttributeProto.GRAPHS else [])  # fmt: skip
    return outer_reads(subs)


def outer_reads(bodies: Sequence[onnx.GraphProto]) -> list[str]:
    """Tensors the graphs `bodies` (a node's If, Loop or Scan bodies) read from the scope
    around them, their own bodies' reads included."""
    reads: list[str] = []
    for sub in bodies:
        local = {v.name for v in sub.input} | {t.name for t in sub.initializer}
        for inner in sub.node:
            reads += [t for t in (*inner.input, *_outer_reads(inner)) if t and t not in local]
            local.update(inner.output)
    return reads


def weights(model: onnx.ModelProto) -> list[tuple[str, str, float]]:
    """(name, dtype, bytes) of every initializer (external data counted by its dims) and
    Constant node value, at the top level."""
    from onnx import helper

    out = []
    tensors = [*model.graph.initializer]
    tensors += [a.t for n in model.graph.node if n.op_type == "Constant" for a in n.attribute
                if a.name == "value"]  # fmt: skip
    for t in tensors:
        try:
            dtype = helper.tensor_dtype_to_np_dtype(t.data_type)
            name, item = dtype.name, dtype.itemsize
        except (KeyError, TypeError, ValueError):
            name, item = f"type{t.data_type}", 1
        out.append((t.name, name, float(math.prod(t.dims)) * item))
    return out
