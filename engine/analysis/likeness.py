"""May two runs be judged against each other, and does their difference stand out?

One rule for every place that puts two runs side by side (the Runs table's Δ, `compare`,
`gate`, the window's Compare tab): a difference is a result only when the runs are like
for like (the same model, inputs, batch, engine and kind of latency), neither was measured
on a busy machine, and their intervals separate. Otherwise it is shown, uncoloured, with
the reason it is not a verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.measure.contention import Contention


@dataclass(frozen=True, slots=True)
class Side:
    """What decides whether a run is like another: its facts, as recorded."""

    model: str | None  # the model file's sha256 (or its name where no hash is known)
    inputs: Mapping[str, Any] | str | None  # name -> shape, or a text such as "x 1x128"
    batch: int | None
    engine: str | None
    contention: Contention | None
    kind: str = "per inference"  # what a latency sample measures


def unlike(b: Side, c: Side, *, same_model: bool = True) -> list[str]:
    """Why the two runs are not like for like (empty: they are). Config knobs (precision,
    fusion, threads, provider) are what a comparison is for, and are not listed; nor, with
    `same_model` False, the model and engine (`compare` and `gate` of a new model file
    against the old one): other shapes or another kind of latency are never comparable."""
    out: list[str] = []
    if same_model and b.model and c.model and b.model != c.model:
        out.append("other models")
    if b.inputs is not None and c.inputs is not None and _shapes(b.inputs) != _shapes(c.inputs):
        out.append(f"other inputs ({_text(b.inputs)} vs {_text(c.inputs)})")
    if b.batch and c.batch and b.batch != c.batch:
        out.append(f"other batch ({b.batch} vs {c.batch})")
    if same_model and b.engine and c.engine and b.engine != c.engine:
        out.append(f"other engines ({b.engine} vs {c.engine})")
    if b.kind != c.kind:
        out.append(f"other latencies ({b.kind} vs {c.kind})")
    return out


def busy(b: Side, c: Side, names: tuple[str, str] = ("baseline", "candidate")) -> list[str]:
    """Each side measured on a busy machine, with its numbers (empty: both quiet or not
    known: files from before OpScope measured it say nothing either way)."""
    return [
        f"the {name} was measured busy ({side.contention.line().removeprefix('busy: ')})"
        for name, side in zip(names, (b, c), strict=True)
        if side.contention is not None and side.contention.busy
    ]


def verdict(slower: bool, unlike_: list[str], busy_: list[str], baseline_busy: bool) -> str:
    """ "regression", "ok", "unlike" (other shapes or latencies: no verdict) or
    "inconclusive": a side was measured busy, and either the candidate reads slower
    (contention explains it as well as the change does) or the baseline was busy (its
    slowness could hide a regression). A busy candidate that still reads no slower is ok."""
    if unlike_:
        return "unlike"
    if busy_ and (slower or baseline_busy):
        return "inconclusive"
    return "regression" if slower else "ok"


def separated(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    """Two intervals that do not overlap (False when either is unknown)."""
    if a is None or b is None:
        return False
    return a[1] < b[0] or b[1] < a[0]


def _shapes(inputs: Mapping[str, Any] | str) -> Any:
    if isinstance(inputs, str):
        return inputs
    out = {}
    for k, v in inputs.items():
        shape = v.get("shape") if isinstance(v, Mapping) else v
        out[k] = tuple(shape) if isinstance(shape, list | tuple) else shape
    return out


def _text(inputs: Mapping[str, Any] | str) -> str:
    if isinstance(inputs, str):
        return inputs
    return ", ".join(
        f"{k} {'x'.join(map(str, s)) if isinstance(s, tuple) else s}"
        for k, s in _shapes(inputs).items()
    )
