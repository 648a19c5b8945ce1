"""The roofline model, cache-aware: where each op sits against the roof that bounds it.

Pure functions. The machine has a bandwidth roof per memory level (L1, L2, L3, DRAM:
engine/machine/level_bandwidth.py) and compute roofs for float and integer arithmetic
(engine/machine/compute_roofs.py). An op is placed against the level its working set (the
bytes one execution reads and writes) fits in, and against the integer roof when it
computes in integers (INT8 QLinear ops), the float one otherwise. Attainable rate at
arithmetic intensity I (FLOP/byte) is min(compute roof, I * level bandwidth); an op is
memory-bound below that pair's ridge point. Its fraction is achieved / attainable; an op
with no FLOP model is measured against its level's bandwidth alone ("memory").

Some ops no roof explains; they are bound by "overhead" (no fraction shown): ops that only
change a shape (Reshape, Squeeze, ...: `op_families.is_shape_only`, and shape arithmetic
on int64 vectors) move no data, so bytes over time is no bandwidth; and small ops: the
roof would do their work in less than one kernel's fixed cost (FIXED_COST_US), they took
at least twice that work, and no more than OVERHEAD_SLACK times what the fixed cost plus
that work predicts. Their time is mostly the kernel's fixed cost (dispatch, allocation,
the profiler's own event), so "compute 2%" would blame a roof for it. A small op that took
far longer than that (a preempted one on a busy machine, a slow kernel) keeps its roof
and its low fraction: that is a finding, not overhead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from engine.measure.op_families import is_shape_only
from engine.measure.op_stats import OpStat

ABOVE = 1.10  # an op this far above its roof says the roof was measured too low
# An ORT CPU kernel's fixed cost as profiled: a 1-element Add's node time was 4-5 us, a
# 16K-element one's 7 us (2-vCPU Xeon, ORT 1.31; bench/ none: measured once by hand).
FIXED_COST_US = 5.0
OVERHEAD_FRACTION = 0.5  # below half the roof: most of the op's time is not the roof's work
OVERHEAD_SLACK = 3.0  # fixed cost varies (4-7 us above, more with threads): up to 3x of it
INTEGER_OPS = frozenset({"MatMulInteger", "ConvInteger", "MatMulIntegerToFloat",
                         "DynamicQuantizeMatMul", "QGemm", "QAttention"})  # fmt: skip


@dataclass(frozen=True)
class MemoryRoof:
    name: str  # "L1", "L2", "L3", "DRAM"
    capacity: float  # bytes the level holds for the engine's threads (inf: DRAM)
    gbps: float


@dataclass(frozen=True)
class Roofs:
    """The machine's roofs for one provider: memory levels nearest the core first, DRAM
    last; compute in GFLOP/s (float) and GOP/s (integer; None when never measured)."""

    memory: tuple[MemoryRoof, ...]
    compute: float
    int_compute: float | None = None
    theoretical: float | None = None  # float32 upper bound (engine/machine/theoretical.py)
    caveat: str | None = None  # why these are not (yet) the machine's roofs: "measured busy"

    @property
    def dram(self) -> MemoryRoof:
        return self.memory[-1]

    def level_for(self, working_set: float) -> MemoryRoof:
        """The nearest level `working_set` bytes fit in (DRAM beyond the last cache)."""
        return next((m for m in self.memory if working_set <= m.capacity), self.dram)

    def compute_for(self, op_type: str) -> tuple[str, float]:
        """('int8', GOP/s) for an integer op when that roof is known, else ('fp32', ...)."""
        if self.int_compute and is_integer_op(op_type):
            return "int8", self.int_compute
        return "fp32", self.compute

    def describe(self) -> str:
        """'L1 181 GB/s (64 KiB) · ... · DRAM 40.9 GB/s; fp32 216 GFLOP/s, int8 842 GOP/s'."""
        levels = " · ".join(
            f"{m.name} {m.gbps:.3g} GB/s"
            + ("" if math.isinf(m.capacity) else f" ({_size(m.capacity)})")
            for m in self.memory
        )
        compute = f"fp32 {self.compute:.4g} GFLOP/s"
        if self.int_compute:
            compute += f", int8 {self.int_compute:.4g} GOP/s"
        if self.theoretical:
            compute += f" (theoretical fp32 at most {self.theoretical:.4g} GFLOP/s)"
        provisional = f" [PROVISIONAL: {self.caveat}]" if self.caveat else ""
        return f"{levels}; {compute}{provisional}"

    def to_json(self) -> dict[str, Any]:
        return {
            "memory": [
                {
                    "name": m.name,
                    "bytes": None if math.isinf(m.capacity) else int(m.capacity),
                    "gbps": m.gbps,
                }
                for m in self.memory
            ],
            "compute_gflops": self.compute,
            "int_gops": self.int_compute,
            "provisional": self.caveat,
        }


def _size(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def simple_roofs(gbps: float, gflops: float) -> Roofs:
    """One DRAM roof and one compute roof (a GPU's, or peaks measured before levels)."""
    return Roofs((MemoryRoof("DRAM", math.inf, gbps),), gflops)


def is_integer_op(op_type: str) -> bool:
    return op_type.startswith("QLinear") or op_type in INTEGER_OPS


@dataclass(frozen=True)
class Placement:
    level: MemoryRoof  # the memory level whose bandwidth applies
    compute_name: str  # "fp32" or "int8"
    compute: float  # that compute roof
    bound: str  # "memory", "compute" or "overhead" (no roof explains its time)
    fraction: float | None  # achieved / attainable (None for an op that moves no data)

    @property
    def label(self) -> str:
        """'L2 70%' (memory-bound, the level named), 'compute 40%', 'int8 40%'; 'L2 >roof'
        beyond 110% of it (the roofs were measured low: see `above_roof`); 'overhead'."""
        if self.bound == "overhead":
            return "overhead"
        where = self.level.name if self.bound == "memory" else (
            "int8" if self.compute_name == "int8" else "compute")  # fmt: skip
        if self.fraction is None:
            return where
        return f"{where} >roof" if self.fraction > ABOVE else f"{where} {self.fraction:.0%}"

    @property
    def ridge(self) -> float:
        return self.compute / self.level.gbps


def working_set(stat: OpStat) -> float:
    """Bytes one execution of the op reads and writes (unknown: past every cache, DRAM)."""
    return math.inf if stat.bytes is None else stat.bytes / max(stat.calls or 1, 1)


def place(stat: OpStat, roofs: Roofs) -> Placement:
    level = roofs.level_for(working_set(stat))
    name, compute = roofs.compute_for(stat.op_type)
    if is_shape_only(stat.op_type) or (stat.gbps is None and stat.gflops is None):
        return Placement(level, name, compute, "overhead", None)  # it moves no data
    if stat.gflops is not None and stat.intensity is not None and stat.intensity > 0:
        roof = attainable_gflops(stat.intensity, level.gbps, compute)
        bound = "compute" if stat.intensity >= compute / level.gbps else "memory"
        frac = stat.gflops / roof if roof > 0 else None
    else:
        bound = "memory"
        frac = stat.gbps / level.gbps if stat.gbps is not None and level.gbps > 0 else None
    if frac is not None and overhead_bound(stat, frac):
        bound = "overhead"
    return Placement(level, name, compute, bound, frac)


def overhead_bound(stat: OpStat, fraction: float) -> bool:
    """Whether the op's time is mostly fixed per-op cost: the roof would do its work (per
    call) in less than FIXED_COST_US, it reached less than OVERHEAD_FRACTION of it, and it
    took no longer than OVERHEAD_SLACK x (fixed cost + that work)."""
    call_us = stat.time_ms * 1e3 / max(stat.calls or 1, 1)
    roof_us = fraction * call_us
    return (
        fraction < OVERHEAD_FRACTION
        and roof_us < FIXED_COST_US
        and call_us <= OVERHEAD_SLACK * (FIXED_COST_US + roof_us)
    )


def attainable_gflops(intensity: float, peak_gbps: float, peak_gflops: float) -> float:
    """The roof above an op of this arithmetic intensity."""
    return min(peak_gflops, intensity * peak_gbps)


def roofline_fields(stat: OpStat, roofs: Roofs) -> dict[str, Any]:
    """{"bound", "level", "roof_gflops", "peak_fraction"} for one op's JSON."""
    p = place(stat, roofs)
    return {
        "bound": p.bound,
        "level": p.level.name,
        "compute_roof": p.compute_name,
        "peak_fraction": p.fraction,
    }


def above_roof(stats: list[OpStat], roofs: Roofs, slack: float = ABOVE) -> list[OpStat]:
    """The ops that run faster than the roof placed above them allows, by more than `slack`:
    the roofs are too low (measured while the machine was busy, or on another machine)."""
    return [s for s in stats if (p := place(s, roofs)).bound != "overhead"
            and p.fraction is not None and p.fraction > slack]  # fmt: skip


def roof_curve(
    gbps: float, gflops: float, lo: float = 1e-3, hi: float = 1e4
) -> tuple[list[float], list[float]]:
    """Intensities and attainable GFLOP/s of one roof's three corners over [lo, hi]."""
    ridge = gflops / gbps
    xs = [lo, min(max(ridge, lo), hi), hi]
    return xs, [attainable_gflops(x, gbps, gflops) for x in xs]
