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


QDQ = frozenset(
    {
        "QuantizeLinear",
        "DequantizeLinear",
        "Transpose",
        "Cast",
        "Reshape",
        "ReorderInput",
        "ReorderOutput",
    }
)
# what ONNX Runtime folds into the node before it (a Conv's BatchNormalization and
# activation, a MatMul's bias): carried with the node that replaced it
FOLDS_INTO = frozenset(
    {"BatchNormalization", "Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "Tanh", "Add"}
)
SUFFIXES = ("_QuantizeLinear_Output", "_DequantizeLinear_Output", "_quantized", "_output_0")


def by_name(
    origins: dict[str, list[str]], as_run: Sequence[NodeIO], as_loaded: Sequence[NodeIO]
) -> dict[str, list[str]]:
    """`origins` refined by name where tensors alone cannot tell. An INT8 variant renames
    every tensor it quantizes, but its nodes keep the loaded node's name (QLinearConv
    `node_Conv_95_token_1` for Conv `node_Conv_95`, MatMulInteger `.../query/MatMul_quant`)
    or write a tensor named after it. So a run node the tensor walk left unmatched takes
    the loaded node it is named after, and run nodes that share one region (the Q, K and V
    MatMuls of a dynamically quantized layer read one quantized input) split it by name.
    A matched node brings the nodes folded into it after it (its BatchNormalization, Relu,
    bias Add) up to the next matched one. Inserted quantize, dequantize and layout nodes
    claim what no named node took."""
    loaded = {n.name: n for n in as_loaded}
    run = {n.name: n for n in as_run}
    producer = {t: n.name for n in as_loaded for t in n.outputs if t}
    consumers: dict[str, list[str]] = {}
    for n in as_loaded:
        for t in n.inputs:
            consumers.setdefault(t, []).append(n.name)

    def chain(start: str, free: set[str]) -> list[str]:
        """`start` with what was folded into the same kernel: back from a folded kind (a
        node named after its Relu) to the node it folded into, then on through the folded
        kinds after it; each step one consumer, free to take."""
        region, at = [start], start
        while loaded[at].op_type in FOLDS_INTO:
            ins = [producer[t] for t in loaded[at].inputs if t in producer]
            back = [p for p in ins if p in free and len(_consumers(p)) == 1]
            if len(back) != 1:
                break
            at = back[0]
            free.discard(at)
            region.insert(0, at)
        at = start
        while True:
            outs = _consumers(at)
            if len(outs) != 1 or outs[0] not in free or loaded[outs[0]].op_type not in FOLDS_INTO:
                return region
            at = outs[0]
            free.discard(at)
            region.append(at)

    def _consumers(name: str) -> list[str]:
        return [c for t in loaded[name].outputs for c in consumers.get(t, [])]

    out = dict(origins)
    shared: dict[tuple[str, ...], list[str]] = {}
    for name, found in origins.items():
        if found:
            shared.setdefault(tuple(found), []).append(name)
    for group, members in shared.items():
        if len(members) < 2:
            continue
        free = set(group)
        named: dict[str, str] = {}
        for m in members:
            hit = None if run[m].op_type in QDQ else _named(run[m], loaded, producer)
            if hit is not None and hit in free and hit not in named.values():
                named[m] = hit
        for m, start in named.items():
            free.discard(start)
            out[m] = chain(start, free)
        for m in members:
            if m not in named:
                out[m] = [x for x in group if x in free]
    still = {n for n, r in run.items() if n in loaded and loaded[n].op_type == r.op_type}
    taken = {x for v in out.values() for x in v} | still
    hits: dict[str, str] = {}
    for n in as_run:  # every name matched first: a chain never swallows a named node
        if origins.get(n.name) or n.name not in origins or n.op_type in QDQ:
            continue
        hit = _named(n, loaded, producer)
        if hit and hit not in taken:
            taken.add(hit)
            hits[n.name] = hit
    for name, hit in hits.items():
        out[name] = chain(hit, set(loaded) - taken)
        taken.update(out[name])
    return out


def _named(n: NodeIO, loaded: dict[str, NodeIO], producer: dict[str, str]) -> str | None:
    """The loaded node `n` is named after: its own name, the longest loaded node or tensor
    name its name starts with (at a '_'; a tensor stands for its producer), or the producer
    of a loaded tensor its output is named after."""
    if n.name in loaded:
        return n.name
    cut = n.name
    while "_" in cut:  # 'node_Conv_95_token_1': the node; 'relu_nchwc': the tensor's maker
        cut = cut.rsplit("_", 1)[0]
        if cut in loaded:
            return cut
        if cut in producer:
            return producer[cut]
    for t in n.outputs:
        base = next((t.removesuffix(s) for s in SUFFIXES if t.endswith(s)), t)
        if base in loaded:
            return base
        if base in producer:
            return producer[base]
    return None
