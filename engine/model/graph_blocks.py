"""Repeated blocks in a model's graph (transformer layers, a ResNet stage's bottlenecks), so a
graph view can fold each repetition into one box carrying its summed figures.

By structure alone, as exported names are often meaningless (`node_MatMul_148`) and ONNX
Runtime renames and fuses nodes: the data-path nodes in a canonical order are cut where
fewest tensors are live (shape arithmetic and constants follow their readers, what every
layer reads is not counted); the segments get a name-free hash of their ops and wiring, and
tandem repeats of those hashes are the blocks. Several cut levels are tried, the repeats
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
    """Main nodes in canonical order, what is live at each gap, side nodes' main readers."""

    nodes: Sequence[NodeIO]
    order: list[int]  # main node indices by position
    pos: list[int]  # node index -> position (-1: a side node)
    static: list[bool]  # node computes a constant (no graph input upstream)
    lo: list[int]  # side node -> first/last main consumer position (len(order), -1: none)
    hi: list[int]
    cuts: list[tuple[list[int], list[int]]]  # per way of counting, gap -> live tensors, readers
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
                e, last = s + k * p, pre[s + p] - pre[s + p - 1]
                if p > 1 and e + p <= len(sig) and sig[e : e + p - 1] == sig[s : s + p - 1]:
                    k += abs(pre[e + p] - pre[e + p - 1] - last) <= max(1, last // 4)
                cands.append((nested, pre[s] - pre[s + k * p], level, p, s, k, bounds))
    # a run takes in one more block that differs in its last segment alone (the optimizer
    # fused the last layer's residual Add into the final norm); a unit with a shorter run
    # inside (a ResNet's stage 3's last three blocks and stage 4's first three, equal as the
    # two stages end alike) yields to the shorter runs
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
    """Main and side nodes, the canonical order, and the live counts at its gaps."""
    n = len(nodes)
    producer: dict[str, int] = {}
    users: dict[str, list[int]] = {}
    consts, shapes = set(weights), set[str]()
    static, depth, main = [False] * n, [0] * n, [False] * n
    for i, node in enumerate(nodes):
        ins = [t for t in node.inputs if t]
        known = [t in consts or (t not in producer and t not in inputs) for t in ins]
        if node.op_type == "Constant" or (ins and all(known)):  # no graph input upstream
            static[i] = True
            consts.update(node.outputs)
        elif ins and (node.op_type in _SHAPE_OPS or all(t in consts or t in shapes for t in ins)):
            shapes.update(node.outputs)  # shape arithmetic: follows its consumers
        else:
            main[i] = True
            ups = (producer.get(t, -1) for t in ins)
            depth[i] = 1 + max((depth[p] for p in ups if p >= 0 and main[p]), default=0)
        producer.update((t, i) for t in node.outputs if t)
        for t in node.inputs:
            users.setdefault(t, []).append(i)
    local = [hash(node.op_type) for node in nodes]
    for _ in range(3):  # a node's op type and its inputs' up to three steps back
        local = [hash((node.op_type, *(local[p] if (p := producer.get(t, -1)) >= 0 and main[p]
                 else t in consts for t in node.inputs))) for node in nodes]  # fmt: skip
    # main tensors with their main readers. One read by like nodes at different depths (an
    # attention mask, rotary tables) is read by every layer: never counted, and computed
    # first. One read by like nodes at one depth may be too (a mask only a Where reads), or
    # feed parallel branches (Q, K, V): counted and not, both tried.
    reads: dict[str, list[int]] = {}
    for t, cs in users.items():
        p = producer.get(t, -1)
        if (p >= 0 and main[p]) or (p < 0 and t in inputs and t not in consts):
            reads[t] = [c for c in cs if main[c]]
    every = {t for t, cs in reads.items()
             if len({local[c] for c in cs}) < len({(local[c], depth[c]) for c in cs})}  # fmt: skip
    alike = every | {t for t, cs in reads.items() if len({local[c] for c in cs}) < len(cs)}
    ends = {i for i in range(n) if main[i] and not any(reads.get(t) for t in nodes[i].outputs)}
    made = [{producer.get(t, -1) for t in ts} - {-1} for ts in (every, alike - every)]
    roots = [*sorted(made[0], key=lambda i: (depth[i], i)),
             *sorted(ends | made[1], key=lambda i: (depth[i], i))]  # fmt: skip
    order = _order(nodes, producer, main, roots)
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
    reads: dict[str, list[int]], skip: set[str], producer: dict[str, int], pos: list[int], m: int
) -> tuple[list[int], list[int]]:
    """Live tensors and their readers at each gap: from the producer, or for a graph input just
    before its first reader (a layer's own past keys never count before it), to the last."""
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
    nodes: Sequence[NodeIO], producer: dict[str, int], main: list[bool], roots: list[int]
) -> list[int]:
    """Main nodes depth-first from roots, inputs in their order: so a node comes just before
    its first reader (a side input of the tail in the tail, not in the first layer)."""
    ups = [[p for t in node.inputs if (p := producer.get(t, -1)) >= 0 and main[p]]
           for node in nodes]  # fmt: skip
    seen, order = [False] * len(nodes), []
    for root in roots:
        stack = [] if seen[root] else [(root, iter(ups[root]))]
        seen[root] = True
        while stack:
            p = next((p for p in stack[-1][1] if not seen[p]), -1)
            if p < 0:
                order.append(stack.pop()[0])
            else:
                seen[p] = True
                stack.append((p, iter(ups[p])))
    return order


def _segments(g: _Graph, bounds: list[int]) -> tuple[list[int], list[int]]:
    """Each segment's structural hash (its non-constant nodes' op types and wiring inside the
    segment, names and order ignored) and the prefix sums of its node counts."""
    seg = [j for j in range(len(bounds) - 1) for _ in range(bounds[j], bounds[j + 1])]
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
        desc = [
            (h[p], g.nodes[p].outputs.index(t))
            if t not in g.consts and (p := g.producer.get(t, -1)) >= 0 and segn[p] == s
            else t in g.consts
            for t in node.inputs
        ]  # fmt: skip  (else: a constant, or from outside)
        h[i] = hash((node.op_type, *desc))
        members[s].append(h[i])
    return [hash(tuple(sorted(x))) for x in members], [0, *accumulate(cnt)]


def _tandems(
    sig: list[int], pre: list[int], gap: list[tuple[int, int]], min_nodes: int
) -> list[tuple[int, int, int]]:
    """(period, first segment, repetitions) of each maximal tandem repeat of sig, starting at
    the gap with the fewest live tensors (not after a pre-norm, nor after a downsampling
    block's shortcut, alike a block's last Conv), then covering the most nodes, then with the
    most readers (a layer's input feeds Q, K, V and the residual). gap: (-live, readers)."""
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
            if b - a < p:
                continue
            starts = range(a, min(a + p, b - p + 1))
            keys = [(gap[s][0], pre[end - (end - s) % p] - pre[s], gap[s][1], -s)
                    for s in starts if pre[s + p] - pre[s] >= min_nodes]  # fmt: skip
            if keys:
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
