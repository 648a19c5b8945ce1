"""Which nodes of the model as loaded each node of the graph as run replaced: fusion made
visible (the graph view's "as loaded" against "as run", issue #26).

ONNX Runtime's optimized graph keeps the tensor names at a fused region's borders: a
LayerNormalization that replaced ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add
reads the region's input and the weights, and writes the region's output. So the original
nodes a run node replaced are found by tensors alone: walking back from the producers of
its outputs in the loaded graph, through every node whose inputs are not among the run
node's own inputs (nor graph inputs or weights), collects exactly the region. A run node
whose name and op type the loaded graph has unchanged replaced nothing, and a region never
takes in or walks past a node that still runs as it was.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.model.graph_io import NodeIO


def fused_origins(
    as_run: Sequence[NodeIO],
    as_loaded: Sequence[NodeIO],
    loaded_inputs: Sequence[str] = (),
    weights: frozenset[str] = frozenset(),
) -> dict[str, list[str]]:
    """{run node: the loaded nodes it replaced, in file order} for every run node that is
    not a loaded node as it was (a fusion, or a node the optimizer rewrote). Run nodes
    joined by tensors the loaded graph never had (a MatMul+Add become Reshape, Gemm,
    Reshape) are one group and share their region; a group whose outputs the loaded graph
    never produced (a layout reorder, an inserted cast) maps to []."""
    loaded = {n.name: n for n in as_loaded}
    order = {n.name: i for i, n in enumerate(as_loaded)}
    producer = {t: n.name for n in as_loaded for t in n.outputs if t}
    known = set(producer) | set(loaded_inputs) | weights
    known.update(t for n in as_loaded for t in n.inputs if t)
    # nodes that still run as they were: a region never takes them in, nor walks past them
    # (a run node reading a renamed tensor, a layout copy, must not claim the graph above it)
    kept = {n.name for n in as_run if n.name in loaded and loaded[n.name].op_type == n.op_type}
    changed = [n for n in as_run if n.name not in kept]
    groups = _groups(changed, known)
    out: dict[str, list[str]] = {}
    for members in groups:
        reads = {t for n in members for t in n.inputs if t in known}
        writes = {t for n in members for t in n.outputs if t in producer}
        stop = set(loaded_inputs) | weights | reads
        region: set[str] = set()
        todo = [producer[t] for t in writes]
        while todo:
            name = todo.pop()
            if name in region or name in kept:
                continue
            region.add(name)
            for t in loaded[name].inputs:
                if t and t not in stop and t in producer:
                    todo.append(producer[t])
        ordered = sorted(region, key=lambda n: order[n])
        for n in members:
            out[n.name] = ordered
    return out


def _groups(changed: Sequence[NodeIO], known: set[str]) -> list[list[NodeIO]]:
    """The changed run nodes, joined when one reads a new tensor another writes."""
    parent = {n.name: n.name for n in changed}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    writer = {t: n.name for n in changed for t in n.outputs if t and t not in known}
    for n in changed:
        for t in n.inputs:
            if t in writer:
                parent[root(n.name)] = root(writer[t])
    by_root: dict[str, list[NodeIO]] = {}
    for n in changed:
        by_root.setdefault(root(n.name), []).append(n)
    return list(by_root.values())


def removed(
    as_run: Sequence[NodeIO], as_loaded: Sequence[NodeIO], origins: dict[str, list[str]]
) -> list[str]:
    """Loaded nodes that neither still run nor were fused into a run node: folded into
    constants or eliminated (shape arithmetic, identities, redundant casts), in file order."""
    gone = {n.name for n in as_loaded} - {n.name for n in as_run}
    claimed = {x for v in origins.values() for x in v}
    return [n.name for n in as_loaded if n.name in gone and n.name not in claimed]
