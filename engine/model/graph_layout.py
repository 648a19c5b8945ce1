"""Where each node of a graph view goes, and how each edge runs: a layered (Sugiyama)
layout, top to bottom, by graphlay (bench/results/graph_layout_candidates.md says why that
library: 0.06 s at 300 nodes and 3 s at 5,000 here, a permissive licence, one wheel, node
sizes taken and edges routed). It sits behind `lay_out` so that it can be swapped.

Layouts are cached per graph: the key is a hash of what the layout depends on (the nodes,
their sizes and parents, the edges, the library's version), so a model opened again, or
another config that runs the same graph, is drawn at once. A cached file that does not
read back whole is laid out again.

graphlay's time grows with the square of the nodes (a chain of 8,000: 1.4 s) and with the
fourth power of the widest layer (a fan-out of 200: 3.7 s, of 20,000: without end), in one
native call that holds the interpreter (Ctrl-C waits for it). `estimate_s` says what it
would take from the graph's layers; beyond `GRAPHLAY_BUDGET_S` the graph gets `_layered`,
a layout by longest-path layers whose wide layers wrap into rows: linear, a 1,000,000-node
chain in seconds, interruptible between its steps."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import OpScopeError, one_line

LAYOUT_VERSION = 2  # bump when what is cached changes
GRAPHLAY_BUDGET_S = 1.5  # estimated: beyond, the linear layout (Ctrl-C within about that)
PER_NODE2_S = 1.1e-7  # graphlay's seconds per node squared (a 4,849-node encoder: 2.6 s)
PER_WIDTH4_S = 2.3e-9  # ... per widest layer's width to the fourth (a fan-out of 200: 3.7 s)
WRAP = 12  # the linear layout's boxes per row: a wider layer wraps
GAP_X, GAP_Y = 24.0, 36.0
NODE_H = 28.0
CHAR_W = 7.0  # the view's label font: an op type's width in the box


@dataclass(frozen=True)
class Box:
    name: str
    label: str  # what the box shows (an op type, an input's name, a block's title)
    parent: str | None = None  # a body's nodes sit inside their If/Loop/Scan node's box
    lines: int = 1


@dataclass
class Placed:
    boxes: dict[str, tuple[float, float, float, float]]  # name -> (x, y, w, h), top-left
    edges: list[tuple[str, str, list[tuple[float, float]]]]  # (src, dst, points)
    bounds: tuple[float, float, float, float]  # x, y, w, h
    seconds: float  # the layout's own time (0 when it came from the cache)
    cached: bool = False
    method: str = "graphlay"  # or "layers": too large for graphlay (`estimate_s`)
    estimate_s: float = 0.0  # what graphlay would have taken, as estimated

    def to_json(self) -> dict[str, Any]:
        return {
            "boxes": {k: list(v) for k, v in self.boxes.items()},
            "edges": [[s, d, [list(p) for p in pts]] for s, d, pts in self.edges],
            "bounds": list(self.bounds),
            "seconds": self.seconds,
            "method": self.method,
            "estimate_s": self.estimate_s,
        }

    @staticmethod
    def from_json(d: dict[str, Any], cached: bool = False) -> Placed:
        """Checked field by field: a layout read from a file (the cache, a job's result)."""
        boxes = {str(k): _four(v) for k, v in dict(d["boxes"]).items()}
        edges = []
        for s, t, pts in d["edges"]:
            if str(s) not in boxes or str(t) not in boxes:
                raise ValueError("an edge names a node the layout lacks")
            edges.append((str(s), str(t), [(float(x), float(y)) for x, y in pts]))
        method = "layers" if d.get("method") == "layers" else "graphlay"
        est = float(d.get("estimate_s") or 0.0)
        return Placed(boxes, edges, _four(d["bounds"]), float(d["seconds"]), cached, method, est)


def _four(v: Any) -> tuple[float, float, float, float]:
    a, b, c, e = (float(x) for x in v)
    return a, b, c, e


def box_width(label: str) -> float:
    return max(44.0, len(label) * CHAR_W + 18.0)


def layout_key(boxes: Sequence[Box], edges: Sequence[tuple[str, str]]) -> str:
    import graphlay

    h = hashlib.sha256()
    h.update(json.dumps([LAYOUT_VERSION, getattr(graphlay, "__version__", "?")]).encode())
    for b in boxes:
        h.update(json.dumps([b.name, b.label, b.parent, b.lines]).encode())
    for e in edges:
        h.update(json.dumps(list(e)).encode())
    return h.hexdigest()[:32]


def lay_out(
    boxes: Sequence[Box], edges: Sequence[tuple[str, str]], cache: Path | None = None
) -> Placed:
    """The layered layout of `boxes` joined by `edges` (src, dst), from `cache` when it
    holds this very graph's."""
    key = layout_key(boxes, edges) if cache is not None else ""
    if cache is not None:
        hit = _read(cache / f"{key}.json")
        if hit is not None:
            return hit
    layers = layers_of(boxes, edges)
    guess = estimate_s(len(boxes), layers)
    if guess <= GRAPHLAY_BUDGET_S:
        placed = _graphlay(boxes, edges)
    else:
        placed = _layered(boxes, edges, layers)
    placed.estimate_s = guess
    if cache is not None:
        from engine.files import write_atomic

        try:
            cache.mkdir(parents=True, exist_ok=True)
            text = json.dumps(placed.to_json())
            write_atomic(cache / f"{key}.json", lambda fh: fh.write(text))
        except (OSError, OpScopeError):
            pass  # a cache that cannot be written costs the next open its layout time
    return placed


def _read(path: Path) -> Placed | None:
    try:
        return Placed.from_json(json.loads(path.read_text()), cached=True)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _graphlay(boxes: Sequence[Box], edges: Sequence[tuple[str, str]]) -> Placed:
    import graphlay

    t0 = time.perf_counter()
    g = graphlay.Graph()
    index: dict[str, int] = {}
    # parents first: a child names its parent by index
    for b in sorted(boxes, key=lambda b: b.parent is not None):
        fields: dict[str, Any] = {}
        if b.parent is not None and b.parent in index:
            fields["parent"] = index[b.parent]
        index[b.name] = g.node(b.name, width=box_width(b.label), height=NODE_H * b.lines, **fields)
    kept = [(s, d) for s, d in edges if s in index and d in index and s != d]
    for s, d in kept:
        g.edge(s, d)
    try:
        lay = graphlay.layout(g, options={"direction": "topbottom"})
    except Exception as exc:  # graphlay.GraphlayError, or a panic surfaced as another type
        raise OpScopeError(f"graph layout failed: {one_line(exc)}") from exc
    placed: dict[str, tuple[float, float, float, float]] = {}
    for name, i in index.items():
        node = lay.nodes[i]
        c, s = node["center"], node["size"]
        placed[name] = (c["x"] - s["width"] / 2, c["y"] - s["height"] / 2, s["width"], s["height"])
    routed = [
        (s, d, [(p["x"], p["y"]) for p in e["points"]])
        for (s, d), e in zip(kept, lay.edges, strict=True)
    ]
    lo, hi = lay.bounds["min"], lay.bounds["max"]
    bounds = (lo["x"], lo["y"], hi["x"] - lo["x"], hi["y"] - lo["y"])
    return Placed(placed, routed, bounds, time.perf_counter() - t0)


def layers_of(boxes: Sequence[Box], edges: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Each box's layer: the longest path to it from a box nothing feeds (edges that would
    close a cycle are left out). Linear in boxes and edges."""
    succ: dict[str, list[str]] = {b.name: [] for b in boxes}
    indeg = dict.fromkeys(succ, 0)
    for s, d in edges:
        if s in succ and d in succ and s != d:
            succ[s].append(d)
            indeg[d] += 1
    layer = dict.fromkeys(succ, 0)
    todo = [n for n, k in indeg.items() if k == 0]
    while todo:
        n = todo.pop()
        for d in succ[n]:
            layer[d] = max(layer[d], layer[n] + 1)
            indeg[d] -= 1
            if indeg[d] == 0:
                todo.append(d)
    return layer


def estimate_s(n_boxes: int, layers: dict[str, int]) -> float:
    """What graphlay would take on this machine's kind of CPU, quiet (bench/graph_speed.py's
    fits): the nodes squared and the widest layer to the fourth."""
    widths: dict[int, int] = {}
    for k in layers.values():
        widths[k] = widths.get(k, 0) + 1
    widest = max(widths.values(), default=0)
    return PER_NODE2_S * n_boxes**2 + PER_WIDTH4_S * widest**4


def _layered(
    boxes: Sequence[Box], edges: Sequence[tuple[str, str]], layers: dict[str, int]
) -> Placed:
    """Top to bottom by layer, each layer's boxes ordered by where their inputs sit and
    wrapped into rows of `WRAP`; edges straight from a box's bottom to the next's top.
    Bodies are drawn beside their If/Loop node rather than inside it."""
    t0 = time.perf_counter()
    by_layer: dict[int, list[Box]] = {}
    for b in boxes:
        by_layer.setdefault(layers.get(b.name, 0), []).append(b)
    preds: dict[str, list[str]] = {}
    for s, d in edges:
        preds.setdefault(d, []).append(s)
    placed: dict[str, tuple[float, float, float, float]] = {}
    y = 0.0
    for k in sorted(by_layer):
        row = by_layer[k]

        def centre(b: Box) -> float:
            xs = [placed[p][0] + placed[p][2] / 2 for p in preds.get(b.name, ()) if p in placed]
            return sum(xs) / len(xs) if xs else 0.0

        row.sort(key=centre)
        for i in range(0, len(row), WRAP):
            part = row[i : i + WRAP]
            widths = [box_width(b.label) for b in part]
            x = -(sum(widths) + GAP_X * (len(part) - 1)) / 2
            h = max(NODE_H * b.lines for b in part)
            for b, w in zip(part, widths, strict=True):
                placed[b.name] = (x, y, w, NODE_H * b.lines)
                x += w + GAP_X
            y += h + GAP_Y
    routed = []
    for s, d in edges:
        if s in placed and d in placed and s != d:
            a, z = placed[s], placed[d]
            routed.append((s, d, [(a[0] + a[2] / 2, a[1] + a[3]), (z[0] + z[2] / 2, z[1])]))
    if placed:
        lo_x = min(r[0] for r in placed.values())
        hi_x = max(r[0] + r[2] for r in placed.values())
        bounds = (lo_x, 0.0, hi_x - lo_x, max(y - GAP_Y, NODE_H))
    else:
        bounds = (0.0, 0.0, 0.0, 0.0)
    return Placed(placed, routed, bounds, time.perf_counter() - t0, method="layers")
