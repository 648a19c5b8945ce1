"""Where an inference's activation memory goes: a liveness pass over the executed order.

Pure functions over (node, its input tensors, its output tensors) in the order the nodes
run and each tensor's size in bytes. A graph input is alive for the whole inference (the
caller holds it); an intermediate from the node that produces it until the last node that
reads it has run; a graph output from its producer to the end. Weights (initializers) are
not activations: they are counted apart, by dtype. While a node runs its inputs and outputs
are alive at once, so the point after each node in the timeline is what was alive during
it, and the peak is the largest of those: its node and the tensors alive then (largest
first) say what to fuse, recompute or shrink. A tensor whose size is unknown is counted as
unknown, never as zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from engine.model.graph_io import NodeIO

ALIVE_AT_PEAK = 12  # tensors listed at the peak


@dataclass(frozen=True)
class AliveTensor:
    name: str
    bytes: float
    producer: str  # the node that made it, or "input"


@dataclass(frozen=True)
class Liveness:
    timeline: tuple[tuple[str, float], ...]  # (node, bytes alive while it ran), in order
    peak_bytes: float
    at_node: str  # the node at the peak ("" for an empty graph)
    alive_at_peak: tuple[AliveTensor, ...]  # largest first, at most ALIVE_AT_PEAK
    unknown: int  # tensors whose size is unknown: the figures leave them out

    def to_json(self, timeline: bool = True) -> dict[str, object]:
        out: dict[str, object] = {
            "peak_bytes": self.peak_bytes,
            "at_node": self.at_node,
            "alive_at_peak": [
                {"tensor": t.name, "bytes": t.bytes, "producer": t.producer}
                for t in self.alive_at_peak
            ],
            "unknown_tensors": self.unknown,
        }
        if timeline:
            out["timeline"] = [{"node": n, "bytes": b} for n, b in self.timeline]
        return out


def liveness(
    nodes: Sequence[NodeIO],
    sizes: Mapping[str, float | None],
    graph_inputs: Sequence[str],
    graph_outputs: Sequence[str],
    weights: frozenset[str] = frozenset(),
) -> Liveness:
    """The pass; `sizes` maps tensor names to bytes (None or absent: unknown); names in
    `weights` and "" (an omitted optional input) are not activations."""
    last_use: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for t in node.inputs:
            last_use[t] = i
    keep = set(graph_inputs) | set(graph_outputs)  # alive to the end
    unknown: set[str] = set()
    alive: dict[str, AliveTensor] = {}

    def add(name: str, producer: str) -> None:
        if not name or name in weights or name in alive:
            return
        size = sizes.get(name)
        if size is None:
            unknown.add(name)
            size = 0.0
        alive[name] = AliveTensor(name, float(size), producer)

    for name in graph_inputs:
        add(name, "input")
    total = sum(t.bytes for t in alive.values())
    timeline: list[tuple[str, float]] = []
    peak, at, at_peak = total, "", tuple(alive.values())
    for i, node in enumerate(nodes):
        for name in node.outputs:
            if name and name not in alive:
                add(name, node.name)
                if name in alive:
                    total += alive[name].bytes
        timeline.append((node.name, total))
        if total > peak or not at:
            peak, at, at_peak = total, node.name, tuple(alive.values())
        for name in {*node.inputs, *node.outputs}:
            if name in alive and name not in keep and last_use.get(name, -1) <= i:
                total -= alive.pop(name).bytes
    largest = tuple(sorted(at_peak, key=lambda t: -t.bytes)[:ALIVE_AT_PEAK])
    return Liveness(tuple(timeline), peak, at, largest, len(unknown))


def weights_by_dtype(weights: Sequence[tuple[str, float]]) -> dict[str, float]:
    """{dtype name: bytes} over (dtype, bytes) pairs, largest first."""
    out: dict[str, float] = {}
    for dtype, nbytes in weights:
        out[dtype] = out.get(dtype, 0.0) + nbytes
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))
