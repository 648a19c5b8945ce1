"""Repeated blocks in a model's graph (transformer layers, a ResNet stage's bottlenecks), so a
graph view can fold each repetition into one box carrying its summed figures.

Found by structure alone: exported node names are often meaningless (`node_MatMul_148`) and
ONNX Runtime's optimized graphs rename and fuse nodes. The data-path ("main") nodes are put
in a canonical order (depth-first from the outputs, whatever the file order); shape
arithmetic and constants ("side" nodes) stay out of it and follow their readers. The gaps of
that order where fewest tensors are live cut it into segments; each segment gets a hash of
its nodes' op types and wiring (names and order ignored), and tandem repeats of those hashes
(a unit of p segments, k >= 2 times in a row) are the blocks. A tensor every layer reads (an
attention mask) is not counted; other tensors alive over the layers but not over the head
or tail make the lowest count the wrong one, so the lowest few are tried and the repeats
covering the most nodes win. Name scopes (`/encoder/layer.3/...`) only label the blocks.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING

from engine.model.graph_io import NodeIO, graph_nodes

if TYPE_CHECKING:
    import onnx

_SHAPE_OPS = frozenset({"Shape", "Size"})
_LEVELS = 6  # cut levels tried: the lowest live counts between main nodes
_PERIODS = 32  # candidate periods tried per level: the most frequent repeat distances


@dataclass(frozen=True)
class Block:
    label: str  # the name scope its nodes share ("encoder/layer.3"), else "block 3"
    nodes: tuple[str, ...]  # node names, in file order


@dataclass(frozen=True)
class Repeats:
    blocks: tuple[Block, ...]  # consecutive repetitions of one structure, >= 2
    signature: str  # "83 nodes: MatMul x6, Add x9, ..." (the first block's)


@dataclass
class _Graph:
    """Main nodes in canonical order with the live count and fan-out at each gap, and each
    side node's range of (transitive) main consumers."""

    nodes: Sequence[NodeIO]
    order: list[int]  # main node indices by position
    pos: list[int]  # node index -> position (-1: a side node)
    static: list[bool]  # node computes a constant (no graph input upstream)
    lo: list[int]  # side node -> first/last main consumer position (len(order), -1: none)
    hi: list[int]
    # per way of counting: gap g (between positions g-1 and g) -> live main tensors, and
    # how many nodes read them (where a block starts)
    cuts: list[tuple[list[int], list[int]]]
    producer: dict[str, int]
    consts: set[str]  # weights and constant-valued tensors


def repeated_blocks(
    nodes: Sequence[NodeIO], inputs: Iterable[str], weights: Collection[str], *, min_nodes: int = 4
) -> list[Repeats]:
    """Runs of >= 2 consecutive, structurally identical blocks of >= min_nodes nodes each, in
    graph order; a node is in one block at most. nodes in file order (topological)."""
    g = _prepare(nodes, set(inputs), set(weights))
    m = len(g.order)
    cands = []  # (nested, -coverage, level, period, first segment, repetitions, bounds)
    live0, fan0 = g.cuts[0]  # where blocks start is judged on the fuller count
    for live, _ in g.cuts:
        for level, v in enumerate(sorted(set(live[1:m]))[:_LEVELS]):
            bounds = [0, *(x for x in range(1, m) if live[x] <= v), m]
            sig, pre = _segments(g, bounds)
            found = _tandems(sig, pre, [(-live0[b], fan0[b]) for b in bounds], min_nodes)
            for p, s, k in found:
                nested = any(q < p and min(s + p, t + j * q) - max(s, t) >= 2 * q
                             and 3 * (pre[min(s + p, t + j * q)] - pre[max(s, t)])
                             >= pre[s + p] - pre[s] for q, t, j in found)  # fmt: skip
                cands.append((nested, pre[s] - pre[s + k * p], level, p, s, k, bounds))
    # a unit with a shorter run inside (a ResNet's stage 3's last three blocks and stage 4's
    # first three, equal because stages 3 and 4 end alike) yields to the shorter runs
    runs: list[list[tuple[int, int]]] = []  # chosen runs: each block's main positions
    for _, _, _, p, s, k, bounds in sorted(cands, key=lambda c: c[:5]):
        a, b = bounds[s], bounds[s + k * p]
        if all(b <= r[0][0] or r[-1][1] <= a for r in runs):
            runs.append([(bounds[s + i * p], bounds[s + i * p + p]) for i in range(k)])
    return _build(g, sorted(runs))


def graph_repeats(graph: onnx.GraphProto, *, min_nodes: int = 4) -> list[Repeats]:
    """repeated_blocks of an ONNX graph's top level."""
    inputs, weights = [v.name for v in graph.input], {t.name for t in graph.initializer}
    return repeated_blocks(graph_nodes(graph), inputs, weights, min_nodes=min_nodes)


def _prepare(nodes: Sequence[NodeIO], inputs: set[str], weights: set[str]) -> _Graph:
    n = len(nodes)
    producer: dict[str, int] = {}
    consts, shapes = set(weights), set[str]()
    static, depth, main = [False] * n, [0] * n, [False] * n
    for i, node in enumerate(nodes):
        ins = [t for t in node.inputs if t]
        if all(t in consts or (t not in producer and t not in inputs) for t in ins):
            static[i] = True  # no graph input upstream: a constant (Constant, folded weights)
            consts.update(node.outputs)
        elif node.op_type in _SHAPE_OPS or all(t in consts or t in shapes for t in ins):
            shapes.update(node.outputs)  # shape arithmetic: follows its consumers
        else:
            main[i] = True
            ups = (producer.get(t, -1) for t in ins)
            depth[i] = 1 + max((depth[p] for p in ups if p >= 0 and main[p]), default=0)
        producer.update((t, i) for t in node.outputs if t)
    users: dict[str, list[int]] = {}
    for i, node in enumerate(nodes):
        for t in node.inputs:
            users.setdefault(t, []).append(i)
    local = [hash(node.op_type) for node in nodes]
    for _ in range(3):  # a node's op type and its inputs' up to three steps back
        local = [hash((node.op_type, *(local[p] if (p := producer.get(t, -1)) >= 0 and main[p]
                 else t in consts for t in node.inputs))) for node in nodes]  # fmt: skip
    # main tensors with their main readers. One read by like nodes at different depths (an
    # attention mask, rotary tables) is read by every layer, and never counted; one read by
    # like nodes at one depth may be too (a mask that only a Where reads), or the input of
    # parallel branches (Q, K, V): counted, and not, both tried.
    reads: dict[str, list[int]] = {}
    for t, cs in users.items():
        p = producer.get(t, -1)
        if (p >= 0 and main[p]) or (p < 0 and t in inputs and t not in consts):
            reads[t] = [c for c in cs if main[c]]
    kinds = {t: {(local[c], depth[c]) for c in cs} for t, cs in reads.items()}
    every = {t for t, k in kinds.items() if len({h for h, _ in k}) < len(k)}
    alike = every | {t for t, cs in reads.items() if len({local[c] for c in cs}) < len(cs)}
    order = _order(nodes, producer, main, depth, {producer.get(t, -1) for t in alike} - {-1})
    m, pos = len(order), [-1] * n
    for k, i in enumerate(order):
        pos[i] = k
    ways = [every] if every == alike else [every, alike]
    cuts = [_liveness(reads, skip, producer, pos, m) for skip in ways]
    lo, hi = [m] * n, [-1] * n
    for i in reversed(range(n)):
        if not main[i]:
            for c in (c for t in nodes[i].outputs for c in users.get(t, ())):
                a, b = (pos[c], pos[c]) if main[c] else (lo[c], hi[c])
                lo[i], hi[i] = min(lo[i], a), max(hi[i], b)
    return _Graph(nodes, order, pos, static, lo, hi, cuts, producer, consts)


def _liveness(
    reads: dict[str, list[int]],
    skip: set[str],
    producer: dict[str, int],
    pos: list[int],
    m: int,
) -> tuple[list[int], list[int]]:
    """Live tensors, and their readers, at each gap. A tensor is live from its producer to
    its last reader, a graph input from just before its first (read lazily: a layer's own
    past keys and values never count before that layer)."""
    live, fan = [0] * (m + 2), [0] * (m + 2)
    for t, cs in reads.items():
        if t in skip or not cs:
            continue
        p, ks = producer.get(t, -1), [pos[c] for c in cs]
        start, end = pos[p] + 1 if p >= 0 else min(ks), max(ks) + 1
        live[start], live[end] = live[start] + 1, live[end] - 1
        fan[start], fan[end] = fan[start] + len(ks), fan[end] - len(ks)
    return list(accumulate(live)), list(accumulate(fan))


def _order(
    nodes: Sequence[NodeIO],
    producer: dict[str, int],
    main: list[bool],
    depth: list[int],
    shared: set[int],
) -> list[int]:
    """Main nodes in a canonical topological order, whatever the file order: depth-first
    from the ends of the data path and the producers of what several like nodes read (an
    attention mask), shallowest first, inputs in their order. So a node comes just before
    its first reader (a side input of the model's tail in the tail, not in the first layer),
    and what every layer reads before the first."""
    ups = [[p for t in node.inputs if (p := producer.get(t, -1)) >= 0 and main[p]]
           for node in nodes]  # fmt: skip
    ends = {i for i in range(len(nodes)) if main[i]} - {p for u in ups for p in u}
    roots = sorted(ends | shared, key=lambda i: (depth[i], i))
    seen, order = [False] * len(nodes), []
    for root in roots:
        if seen[root]:
            continue
        seen[root] = True
        stack = [(root, iter(ups[root]))]
        while stack:
            it = stack[-1][1]
            p = next((p for p in it if not seen[p]), -1)
            if p < 0:
                order.append(stack.pop()[0])
            else:
                seen[p] = True
                stack.append((p, iter(ups[p])))
    return order


def _segments(g: _Graph, bounds: list[int]) -> tuple[list[int], list[int]]:
    """Each segment's structural hash (its non-constant nodes' op types and wiring inside the
    segment, names and order ignored) and the prefix sums of its node counts."""
    seg: list[int] = []
    for j in range(len(bounds) - 1):
        seg += [j] * (bounds[j + 1] - bounds[j])
    segn = [seg[q] if q >= 0 else (seg[a] if a < len(seg) and seg[a] == seg[b] else -1)
            for q, a, b in zip(g.pos, g.lo, g.hi, strict=True)]  # fmt: skip
    h = [0] * len(g.nodes)
    members: list[list[int]] = [[] for _ in bounds[1:]]
    cnt = [0] * (len(bounds) - 1)
    for i, node in enumerate(g.nodes):
        s = segn[i]
        if s < 0:
            continue
        cnt[s] += 1
        if g.static[i]:
            continue
        desc: list[object] = []
        for t in node.inputs:
            p = g.producer.get(t, -1)
            if t in g.consts or p < 0 or segn[p] != s:
                desc.append(t in g.consts)  # a constant, or a tensor from outside
            else:
                desc.append((h[p], g.nodes[p].outputs.index(t)))
        h[i] = hash((node.op_type, *desc))
        members[s].append(h[i])
    return [hash(tuple(sorted(x))) for x in members], [0, *accumulate(cnt)]


def _tandems(
    sig: list[int], pre: list[int], gap: list[tuple[int, int]], min_nodes: int
) -> list[tuple[int, int, int]]:
    """(period, first segment, repetitions) of each maximal tandem repeat of sig. Its blocks
    start at a gap with the fewest live tensors, even at the cost of a repetition (before a
    pre-norm, not after it; between two ResNet blocks, not after a downsampling block's
    shortcut, which repeats a block's last Conv, Add, Relu); then where they cover the most
    nodes; then where those tensors have the most readers (a layer's input fans out to Q,
    K, V and the residual; the tail of a post-norm does not). gap: (-live, readers)."""
    seen: dict[int, int] = {}
    dist: Counter[int] = Counter()
    for j, x in enumerate(sig):
        if x in seen:
            dist[j - seen[x]] += 1
        seen[x] = j
    out = []
    for p, _ in dist.most_common(_PERIODS):
        eq = list(map(operator.eq, sig, sig[p:]))
        prev = -1
        for b in [j for j, e in enumerate(eq) if not e] + [len(eq)]:
            a, prev, end = prev + 1, b, b + p  # sig[a:end] has period p
            starts = range(a, min(a + p, end - 2 * p + 1))
            phases = [s for s in starts if pre[s + p] - pre[s] >= min_nodes]
            if phases:
                keys = [
                    (gap[s][0], pre[end - (end - s) % p] - pre[s], gap[s][1], -s) for s in phases
                ]
                s = -max(keys)[3]
                out.append((p, s, (end - s) // p))
    return out


def _build(g: _Graph, runs: list[list[tuple[int, int]]]) -> list[Repeats]:
    """Blocks of the chosen runs: their main nodes, and side nodes all of whose consumers
    are in the same block."""
    owner = [-1] * len(g.order)
    members: list[list[int]] = []
    for a, b in (span for run in runs for span in run):
        owner[a:b] = [len(members)] * (b - a)
        members.append([g.order[q] for q in range(a, b)])
    for i, (a, b) in enumerate(zip(g.lo, g.hi, strict=True)):
        if g.pos[i] < 0 and a <= b and owner[a] >= 0 and owner[a] == owner[b]:
            members[owner[a]].append(i)
    out, start = [], 0
    for run in runs:
        names = [[g.nodes[i].name for i in sorted(x)] for x in members[start : start + len(run)]]
        start += len(run)
        ops = Counter(g.nodes[i].op_type for i in members[start - len(run)])
        text = ", ".join(f"{op} x{c}" for op, c in ops.most_common(6))
        sig = f"{len(names[0])} nodes: {text}{', ...' if len(ops) > 6 else ''}"
        blocks = (Block(lab, tuple(x)) for lab, x in zip(_labels(names), names, strict=True))
        out.append(Repeats(tuple(blocks), sig))
    return out


def _labels(blocks: list[list[str]]) -> list[str]:
    """The shallowest name scope ("/encoder/layer.3/...") that most of each block's nodes
    share and that tells the blocks apart, as its last two parts; else "block 1", ..."""
    scopes = [[n.strip("/").split("/")[:-1] for n in names if n.startswith("/")]
              for names in blocks]  # fmt: skip
    for d in range(1, max((len(s) for b in scopes for s in b), default=0) + 1):
        modes = []
        for names, sc in zip(blocks, scopes, strict=True):
            top = Counter(tuple(s[:d]) for s in sc if len(s) >= d).most_common(1)
            if not top or 2 * top[0][1] < len(names):
                return [f"block {i + 1}" for i in range(len(blocks))]
            modes.append(top[0][0])
        if len(set(modes)) == len(modes):
            return ["/".join(t[max(0, d - 2) :]) for t in modes]
    return [f"block {i + 1}" for i in range(len(blocks))]
