"""What the graph view paints on each node, Qt-free: per overlay (time share, bound, GB/s,
precision, provider, activation bytes, change against another run) a colour and a short
value for each node, and the legend that reads them.

The live profile names the nodes of the graph as run. A node of the graph as loaded that
fusion replaced shows the figures of the run node that replaced it ("in BiasGelu"); one the
optimizer folded away shows none. A collapsed block carries its members' summed time."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from engine.api import OpStat, Roofs, place

OVERLAYS = (
    "time share",
    "bound",
    "GB/s",
    "precision",
    "provider",
    "activation bytes",
    "weight bytes",
    "change",
)
NONE_COLOR = "#e8e8e8"  # no figure for this node (not profiled, folded away)
HEAT = ("#fff7bc", "#fec44f", "#fe9929", "#ec7014", "#cc4c02", "#8c2d04")
CATEGORY = {
    "INT8": "#4e79a7",
    "Q/DQ": "#edc948",
    "FP32 kept": "#e15759",
    "FP32": "#bab0ac",
    "FP16": "#59a14f",
    "BF16": "#76b7b2",
    "other": "#d9d9d9",
    "unknown": "#ffffff",
}
PROVIDER_COLORS = ("#59a14f", "#4e79a7", "#b07aa1", "#f28e2b", "#9c755f")
FALLBACK = "#e15759"  # a CPU node in a GPU run
FASTER, SLOWER, ONLY = "#1a9850", "#d73027", "#b07aa1"


@dataclass
class Painted:
    colors: dict[str, str] = field(default_factory=dict)
    values: dict[str, str] = field(default_factory=dict)  # short text under the op type
    numbers: dict[str, float] = field(default_factory=dict)  # what a ramp was coloured by
    legend: list[tuple[str, str]] = field(default_factory=list)  # (colour, text)
    note: str = ""


@dataclass
class NodeFigures:
    """What an overlay reads: the live profile's stats by run node, and the view's facts."""

    stats: Mapping[str, OpStat]
    roofs: Roofs | None = None
    precision: Mapping[str, str] = field(default_factory=dict)
    providers: Mapping[str, str] = field(default_factory=dict)
    out_bytes: Mapping[str, float | None] = field(default_factory=dict)
    weight_bytes: Mapping[str, float | None] = field(default_factory=dict)
    stand_in: Mapping[str, str] = field(default_factory=dict)  # loaded node -> run node
    blocks: Mapping[str, Sequence[str]] = field(default_factory=dict)  # box -> members
    baseline: Mapping[str, OpStat] | None = None  # 'change': the other run's stats
    baseline_name: str = ""
    baseline_stand_in: Mapping[str, str] = field(default_factory=dict)  # its fused map


def stat_of(name: str, f: NodeFigures) -> OpStat | None:
    return f.stats.get(name) or f.stats.get(f.stand_in.get(name, ""))


def paint(overlay: str, names: Sequence[str], f: NodeFigures) -> Painted:
    """Colours, values and legend for `overlay` over the nodes `names`."""
    if overlay == "precision":
        return _categories(names, lambda n: f.precision.get(n), CATEGORY)
    if overlay == "provider":
        return _providers(names, f)
    if overlay == "change":
        return _change(names, f)
    values: dict[str, float] = {}
    text: dict[str, str] = {}
    for n in names:
        v = _value(overlay, n, f)
        if v is not None:
            values[n], text[n] = v
    return _ramp(overlay, values, text)


def _value(overlay: str, name: str, f: NodeFigures) -> tuple[float, str] | None:
    members = f.blocks.get(name)
    if members is not None:  # a collapsed block: its members' sums
        if overlay == "time share":
            shares = [s.share for m in members if (s := f.stats.get(m)) is not None]
            return (sum(shares), f"{sum(shares):.1%}") if shares else None
        if overlay in ("activation bytes", "weight bytes"):
            by = f.out_bytes if overlay == "activation bytes" else f.weight_bytes
            sizes = [b for m in members if (b := by.get(m))]
            return (sum(sizes), size_label(sum(sizes))) if sizes else None
        return None
    if overlay in ("activation bytes", "weight bytes"):
        b = (f.out_bytes if overlay == "activation bytes" else f.weight_bytes).get(name)
        return None if not b else (b, size_label(b))
    s = stat_of(name, f)
    if s is None:
        return None
    if overlay == "time share":
        return s.share, f"{s.share:.1%}"
    if overlay == "GB/s":
        return (s.gbps, f"{s.gbps:.3g} GB/s") if s.gbps else None
    if overlay == "bound" and f.roofs is not None:
        p = place(s, f.roofs)
        return (p.fraction, p.label) if p.fraction is not None else None
    return None


def _ramp(overlay: str, values: dict[str, float], text: dict[str, str]) -> Painted:
    out = Painted(values=text, numbers=dict(values))
    if not values:
        out.note = {
            "bound": "the bound waits for the machine's roofs and a profile",
            "activation bytes": "no output sizes known",
        }.get(overlay, "no profile yet: figures follow the first profiled pass")
        return out
    log = overlay in ("GB/s", "activation bytes", "weight bytes")
    lo, hi = (min(values.values()), max(values.values()))
    if overlay == "bound":
        lo, hi = 0.0, max(1.0, hi)
    elif overlay == "time share":
        lo = 0.0

    def scale(v: float) -> float:
        if log:
            a, b, x = (math.log10(max(t, 1e-12)) for t in (lo, hi, v))
        else:
            a, b, x = lo, hi, v
        return 0.0 if b <= a else min(1.0, max(0.0, (x - a) / (b - a)))

    for n, v in values.items():
        out.colors[n] = HEAT[min(len(HEAT) - 1, int(scale(v) * len(HEAT)))]
    fmt = {
        "time share": lambda v: f"{v:.1%}",
        "bound": lambda v: f"{v:.0%} of roof",
        "GB/s": lambda v: f"{v:.3g} GB/s",
        "activation bytes": size_label,
        "weight bytes": size_label,
    }[overlay]
    out.legend = [(HEAT[0], fmt(lo)), (HEAT[-1], fmt(hi)), (NONE_COLOR, "no figure")]
    return out


def _categories(names: Sequence[str], label_of: object, palette: Mapping[str, str]) -> Painted:
    out = Painted()
    seen: dict[str, int] = {}
    for n in names:
        label = label_of(n)  # type: ignore[operator]
        if not label:
            continue
        out.colors[n] = palette.get(label, NONE_COLOR)
        out.values[n] = label
        seen[label] = seen.get(label, 0) + 1
    out.legend = [(palette.get(k, NONE_COLOR), f"{k} ({v})") for k, v in seen.items()]
    return out


def _providers(names: Sequence[str], f: NodeFigures) -> Painted:
    def provider(n: str) -> str | None:
        s = stat_of(n, f)
        p = s.provider if s is not None else f.providers.get(f.stand_in.get(n, n))
        return p.removesuffix("ExecutionProvider") if p else None

    found = sorted({p for n in names if (p := provider(n))})
    gpu = any(p in ("CUDA", "TensorRT", "ROCm", "DML", "MIGraphX") for p in found)
    palette = {p: PROVIDER_COLORS[i % len(PROVIDER_COLORS)] for i, p in enumerate(found)}
    if gpu and "CPU" in palette:
        palette["CPU"] = FALLBACK  # a fallback in a GPU run stands out
    out = _categories(names, provider, palette)
    if gpu and "CPU" in palette:
        out.note = "CPU nodes in a GPU run: each is a fallback (and copies to and from it)"
    return out


def _change(names: Sequence[str], f: NodeFigures) -> Painted:
    out = Painted()
    if f.baseline is None:
        out.note = "pick a run to compare with"
        return out
    only_here = only_there = 0
    base = f.baseline
    for n in names:  # on the model as loaded, each run through the node that replaced it
        now = stat_of(n, f)
        then = base.get(n) or base.get(f.baseline_stand_in.get(n, ""))
        if now is None and then is None:
            continue
        if then is None or now is None:
            out.colors[n] = ONLY
            out.values[n] = "only in this run" if then is None else f"only in {f.baseline_name}"
            only_here += then is None
            only_there += now is None
            continue
        ratio = now.time_ms / then.time_ms if then.time_ms > 0 else math.inf
        out.values[n] = f"{ratio:.2f}x" if math.isfinite(ratio) else "new time"
        if math.isfinite(ratio):
            out.numbers[n] = ratio - 1.0
        out.colors[n] = FASTER if ratio < 0.9 else SLOWER if ratio > 1.1 else NONE_COLOR
    out.legend = [
        (FASTER, "faster by >10%"),
        (SLOWER, "slower by >10%"),
        (NONE_COLOR, "within 10%"),
        (ONLY, "in one run only"),
    ]
    missing = sum(1 for n in f.baseline if n not in set(names))
    if missing and not f.baseline_stand_in:
        out.note = f"{missing} node(s) of {f.baseline_name} are not in this graph"
    return out


def size_label(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"
