"""Where each node of a graph view goes, and how each edge runs: a layered (Sugiyama)
layout, top to bottom, by graphlay (bench/results/graph_layout_candidates.md says why that
library: 0.06 s at 300 nodes and 3 s at 5,000 here, a permissive licence, one wheel, node
sizes taken and edges routed). It sits behind `lay_out` so that it can be swapped.

Layouts are cached per graph: the key is a hash of what the layout depends on (the nodes,
their sizes and parents, the edges, the library's version), so a model opened again, or
another config that runs the same graph, is drawn at once. A cached file that does not
read back whole is laid out again."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import OpScopeError, one_line

LAYOUT_VERSION = 1  # bump when what is cached changes
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

    def to_json(self) -> dict[str, Any]:
        return {
            "boxes": {k: list(v) for k, v in self.boxes.items()},
            "edges": [[s, d, [list(p) for p in pts]] for s, d, pts in self.edges],
            "bounds": list(self.bounds),
            "seconds": self.seconds,
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
        return Placed(boxes, edges, _four(d["bounds"]), float(d["seconds"]), cached)


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
    placed = _graphlay(boxes, edges)
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
