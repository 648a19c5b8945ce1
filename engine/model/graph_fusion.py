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

On a CNN run on CPU (issue #50) the borders are mostly new tensors: the NCHWc layout runs
whole chains of Convs and QuickGelus (Conv -> Sigmoid -> Mul) on blocked tensors, with
ReorderInput/ReorderOutput copies at the chain's ends. A reorder replaced nothing, and the
tensor it copies stands for the loaded one at its other end, as a tensor a node that still
runs reads or writes stands for the loaded one at the same place. What stays new inside a
chain is told by the names ORT gives ('/down/Mul/QuickGeluFusion/' replaced /down/Mul and
the Sigmoid before it; '/down/conv/Conv_output_0_nchwc' the Conv that wrote that tensor,
with the BatchNormalization, HardSwish or Add folded after it), so each QuickGelu claims
its own Sigmoid and Mul, not those of the three layers of its chain.
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
    not a loaded node as it was (a fusion, or a node the optimizer rewrote). A run tensor
    stands for a loaded one of its name, for the loaded tensor a node that still runs reads
    or writes in its place, and for what a layout reorder (ReorderInput, ReorderOutput)
    copies: a reorder replaced nothing. Run nodes joined by tensors that stand for none (a
    MatMul+Add become Reshape, Gemm, Reshape; a chain of NCHWc Convs and QuickGelus) are one
    group: it is split node by node where each is named after a node of the region
    (`split`), and shares the region otherwise. Nodes that only compute constants (a
    weight's Identity, a Constant) are folded, never part of a region."""
    g = _Loaded(as_loaded, loaded_inputs, weights)
    # nodes that still run as they were: a region never takes them in, nor walks past them
    # (a run node reading a renamed tensor, a layout copy, must not claim the graph above it)
    kept = {n.name for n in as_run if n.name in g.nodes and g.nodes[n.name].op_type == n.op_type}
    eq = _stands_for(as_run, g, kept)
    out: dict[str, list[str]] = {
        n.name: [] for n in as_run if n.name not in kept and n.op_type in LAYOUT
    }
    changed = [n for n in as_run if n.name not in kept and n.op_type not in LAYOUT]
    for members in _groups(changed, eq):
        reads = {eq[t] for n in members for t in n.inputs if t in eq}
        writes = {eq[t] for n in members for t in n.outputs if t in eq}
        region = g.walk(writes, reads, kept)
        parts = split(members, region, eq, g, kept) if len(members) > 1 else None
        for n in members:
            out[n.name] = parts[n.name] if parts else g.ordered(region)
    return {n.name: out[n.name] for n in as_run if n.name in out}


LAYOUT = frozenset({"ReorderInput", "ReorderOutput"})


class _Loaded:
    """The loaded graph as the region walks read it."""

    def __init__(self, nodes: Sequence[NodeIO], inputs: Sequence[str], weights: frozenset[str]):
        self.nodes = {n.name: n for n in nodes}
        self.order = {n.name: i for i, n in enumerate(nodes)}
        self.producer = {t: n.name for n in nodes for t in n.outputs if t}
        self.consumers: dict[str, list[str]] = {}
        for n in nodes:
            for t in n.inputs:
                self.consumers.setdefault(t, []).append(n.name)
        self.inputs = set(inputs)
        self.const = set(weights)  # weights, and what only they (or nothing) compute
        for n in nodes:
            if all(not t or t in self.const for t in n.inputs):
                self.const.update(n.outputs)
        self.known = set(self.producer) | self.inputs | self.const | set(self.consumers)

    def walk(self, starts: set[str], stop: set[str], kept: set[str]) -> set[str]:
        """The nodes back from the producers of `starts` up to the tensors `stop`, graph
        inputs and constants, never taking in a node of `kept`."""
        region: set[str] = set()
        todo = [self.producer[t] for t in starts if t in self.producer]
        while todo:
            name = todo.pop()
            if name in region or name in kept:
                continue
            region.add(name)
            for t in self.nodes[name].inputs:
                if t and t not in stop and t not in self.inputs and t not in self.const:
                    todo.extend([self.producer[t]] if t in self.producer else [])
        return region

    def ordered(self, names: set[str]) -> list[str]:
        return sorted(names, key=lambda n: self.order[n])


def _stands_for(as_run: Sequence[NodeIO], g: _Loaded, kept: set[str]) -> dict[str, str]:
    """{run tensor: the loaded tensor it stands for}: its own name, the tensor a kept node
    reads or writes at the same place, or the tensor a layout reorder copies."""
    eq = {t: t for n in as_run for t in (*n.inputs, *n.outputs) if t in g.known}
    grew = True
    while grew:
        grew = False
        for n in as_run:
            if n.name in kept:
                src = g.nodes[n.name]
                pairs = [*zip(n.inputs, src.inputs, strict=False),
                         *zip(n.outputs, src.outputs, strict=False)]  # fmt: skip
            elif n.op_type in LAYOUT and n.inputs and n.outputs:
                a, b = n.inputs[0], n.outputs[0]
                pairs = [(b, eq[a])] if a in eq else [(a, eq[b])] if b in eq else []
            else:
                continue
            for r, loaded in pairs:
                if r and loaded and r not in eq:
                    eq[r] = loaded
                    grew = True
    return eq


def _groups(changed: Sequence[NodeIO], eq: dict[str, str]) -> list[list[NodeIO]]:
    """The changed run nodes, joined when one reads a tensor another writes that stands for
    no loaded one."""
    parent = {n.name: n.name for n in changed}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    writer = {t: n.name for n in changed for t in n.outputs if t and t not in eq}
    for n in changed:
        for t in n.inputs:
            if t in writer:
                parent[root(n.name)] = root(writer[t])
    by_root: dict[str, list[NodeIO]] = {}
    for n in changed:
        by_root.setdefault(root(n.name), []).append(n)
    return list(by_root.values())


def split(
    members: Sequence[NodeIO],
    region: set[str],
    eq: dict[str, str],
    g: _Loaded,
    kept: set[str],
) -> dict[str, list[str]] | None:
    """A group's region node by node, or None where it cannot be told. Each member is named
    after a node of the region, its anchor (QuickGelu '/down/Mul/QuickGeluFusion/' after
    /down/Mul; an NCHWc Conv '/down/conv/Conv_output_0_nchwc' after the producer of that
    tensor). In run order each member takes the nodes back from what its outputs stand for
    up to what its inputs do. An output that stands for nothing stands for its anchor's, or
    for that of a node folded after the anchor (BatchNormalization, HardSwish, Add): the
    furthest whose region passes on no tensor but that one (a Conv before a Sigmoid and Mul
    passes its output to both: the QuickGelu takes them) and holds no other anchor. The
    split holds only where every member takes some nodes and together they take them all."""
    anchors: dict[str, str] = {}
    for n in members:
        a = anchor(n, g)
        if a is not None and a in region and a not in anchors.values():
            anchors[n.name] = a
    eq = dict(eq)
    written = {t for n in members for t in n.outputs}
    claimed: set[str] = set()
    parts: dict[str, list[str]] = {}
    for n in members:
        if any(t in written and t not in eq for t in n.inputs):
            return None
        reads = {eq[t] for t in n.inputs if t in eq}
        outs = [t for t in n.outputs if t]
        ends = {eq[t] for t in outs if t in eq}
        open_ = [t for t in outs if t not in eq]
        own = anchors.get(n.name)
        if len(open_) > 1 or (open_ and own is None):
            return None
        others = set(anchors.values()) - {own}
        best: tuple[str | None, set[str]] | None = None
        for c in _ends(own, region, g) if open_ else [None]:
            to = ends | {c} if c else ends
            r = g.walk(to, reads, kept)
            ok = r <= region - claimed and not r & others and (own is None or own in r)
            if ok and _fits(r, reads, to, own, g) and (best is None or len(r) >= len(best[1])):
                best = c, r
        if best is None:
            return None
        if open_ and best[0] is not None:
            eq[open_[0]] = best[0]
        claimed |= best[1]
        parts[n.name] = g.ordered(best[1])
    return parts if claimed == region else None


def _ends(own: str | None, region: set[str], g: _Loaded) -> list[str]:
    """The tensors a member's output may stand for: its anchor's, and those of the nodes
    folded after it, nearest first."""
    if own is None:
        return []
    out, todo, seen = [], [own], {own}
    while todo:
        name = todo.pop(0)
        out += [t for t in g.nodes[name].outputs if t]
        for t in g.nodes[name].outputs:
            for c in g.consumers.get(t, []):
                if c in region and c not in seen and g.nodes[c].op_type in EPILOGUE:
                    seen.add(c)
                    todo.append(c)
    return out


def _fits(r: set[str], reads: set[str], ends: set[str], own: str | None, g: _Loaded) -> bool:
    """Whether region `r` reads nothing but `reads` and constants, passes on nothing but
    `ends`, and has after its anchor nothing but folded kinds."""
    for x in r:
        node = g.nodes[x]
        for t in node.inputs:
            if t and t not in reads and t not in g.const and g.producer.get(t) not in r:
                return False
        for t in node.outputs:
            if t and t not in ends and any(c not in r for c in g.consumers.get(t, [])):
                return False
    after, todo = set(), [own] if own else []
    while todo:
        for t in g.nodes[todo.pop()].outputs:
            for c in g.consumers.get(t, []):
                if c in r and c not in after:
                    after.add(c)
                    todo.append(c)
    return all(g.nodes[x].op_type in EPILOGUE for x in after)


def anchor(n: NodeIO, g: _Loaded) -> str | None:
    """The loaded node a run node is named after (`_named`), or whose name its own starts
    with at a '/' ('/down/Mul/QuickGeluFusion/', '/fc1/MatMul/MatMulAddFusion')."""
    hit = _named(n, g.nodes, g.producer)
    cut = n.name.rstrip("/")
    while hit is None and "/" in cut:
        cut = cut.rsplit("/", 1)[0]
        hit = cut if cut in g.nodes else None
    return hit


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
# what ONNX Runtime folds into a Conv or MatMul after it, as run on CPU (an NCHWc Conv
# takes a HardSwish, a residual Add)
EPILOGUE = FOLDS_INTO | {"HardSwish", "Sum"}
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
