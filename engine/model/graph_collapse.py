"""The collapsed view of a graph: each repetition of a repeated block (a transformer layer,
found by engine/model/graph_blocks.py) drawn as one box that carries its members' summed
figures. It opens first for a graph too large to draw node by node in time."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.model.graph_layout import Box


@dataclass(frozen=True)
class BlockBox:
    name: str  # unique among the view's boxes
    label: str  # 'layer 3' or the scope the nodes' names share
    members: tuple[str, ...]


def collapse(
    boxes: Sequence[Box],
    edges: Sequence[tuple[str, str]],
    blocks: Sequence[tuple[str, Sequence[str]]],
) -> tuple[list[Box], list[tuple[str, str]], list[BlockBox]]:
    """`boxes` and `edges` with each of `blocks` ((label, member names)) as one box: an
    edge between two members goes, an edge into or out of one joins its block."""
    taken = {b.name for b in boxes}
    owner: dict[str, str] = {}
    made: list[BlockBox] = []
    for label, members in blocks:
        name = f"[{label}]"
        while name in taken:
            name += "'"
        taken.add(name)
        made.append(BlockBox(name, label, tuple(members)))
        for m in members:
            owner[m] = name
    out: list[Box] = []
    placed: set[str] = set()
    for b in boxes:
        o = owner.get(b.name)
        if o is None:
            out.append(Box(b.name, b.label, None if b.parent in owner else b.parent, b.lines))
        elif o not in placed:
            placed.add(o)
            block = next(x for x in made if x.name == o)
            out.append(Box(o, f"{block.label} · {len(block.members)} nodes", None, 2))
    joined: list[tuple[str, str]] = []
    for s, d in edges:
        s2, d2 = owner.get(s, s), owner.get(d, d)
        if s2 != d2:
            joined.append((s2, d2))
    return out, list(dict.fromkeys(joined)), made
