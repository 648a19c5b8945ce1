"""What the op table says beyond each OpStat's own numbers: the bound column against the
machine's roofs, the short provider name, and the header's word on profiler overhead.
Qt-free, so the wording is tested without a window."""

from __future__ import annotations

from collections.abc import Sequence

from engine.api import Contention, OpStat, Roofs, place


def bound_text(stat: OpStat, roofs: Roofs | None) -> str:
    """'L2 34%', 'compute 71%' or 'int8 60%': the roof above the op (the memory level its
    working set fits in, or the float or integer compute roof) and how close it gets;
    'overhead' where no roof explains its time; '–' before the machine's roofs are measured."""
    if roofs is None:
        return "–"
    return place(stat, roofs).label


def bound_sort_key(stat: OpStat, roofs: Roofs | None) -> float:
    """Sorts by the fraction of the roof reached (−inf when unknown)."""
    frac = place(stat, roofs).fraction if roofs else None
    return float("-inf") if frac is None else frac


def bound_tip(stat: OpStat, roofs: Roofs | None) -> str:
    if roofs is None:
        return "The machine's peaks are being measured; the bound follows."
    tip = _bound_tip(stat, roofs)
    if roofs.caveat:  # measured busy or implausible: every fraction is against them
        tip += f"\nThese roofs are PROVISIONAL: {roofs.caveat}."
    return tip


def _bound_tip(stat: OpStat, roofs: Roofs) -> str:
    p = place(stat, roofs)
    if p.bound == "overhead":
        return overhead_tip(stat, p.fraction)
    ws = "unknown" if stat.bytes is None else working_set_text(stat.bytes / max(stat.calls or 1, 1))
    level = (f"Its working set ({ws}) fits in {p.level.name}: {p.level.gbps:.1f} GB/s"
             if p.level.name != "DRAM" else f"Its working set ({ws}) streams from DRAM: "
             f"{p.level.gbps:.1f} GB/s")  # fmt: skip
    unit = "GOP/s" if p.compute_name == "int8" else "GFLOP/s"
    compute = f"{'integer' if p.compute_name == 'int8' else 'float32'} roof {p.compute:.1f} {unit}"
    if stat.intensity is None:
        return (
            f"No FLOP model for {stat.op_type}: measured against its memory level's bandwidth "
            f"alone ({stat.gbps or 0:.2f} GB/s). {level}."
        )
    side = "below" if stat.intensity < p.ridge else "at or above"
    reached = f" It reaches {p.fraction:.0%} of the roof above it." if p.fraction else ""
    if p.fraction is not None and p.fraction > 1.1:
        reached = (
            f" It runs at {p.fraction:.2f}x the roof above it: the roofs were measured on a "
            "busier machine (the engine host measures them again)."
        )
    return (
        f"{level}; {compute}. {stat.intensity:.2f} FLOP/B is {side} their ridge point "
        f"({p.ridge:.1f} FLOP/B): {p.bound}-bound.{reached}"
    )


def overhead_tip(stat: OpStat, fraction: float | None) -> str:
    """Why no roof is named for an op: it moves no data, or its time is fixed cost."""
    if fraction is None:
        return (
            f"{stat.op_type} only changes a shape or computes on shapes: it moves no data, so "
            "no roof applies and no GB/s is given; its time is the kernel's fixed per-op cost."
        )
    per_call_us = stat.time_ms * 1e3 / max(stat.calls or 1, 1)
    return (
        f"At its roof this op's work would take {fraction * per_call_us:.2g} µs per call, less "
        f"than one kernel's fixed cost, yet it took {per_call_us:.3g} µs: its time is mostly "
        f"fixed per-op cost (dispatch, allocation, profiling), not the roof ({fraction:.0%} of "
        "it). Fewer, larger ops (fusion, batching) are what would help."
    )


def working_set_text(n: float) -> str:
    for unit, size in (("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} B"


def short_provider(provider: str) -> str:
    """'CPUExecutionProvider' -> 'CPU' (several: 'CPU,CUDA')."""
    return ",".join(p.removesuffix("ExecutionProvider") for p in provider.split(",") if p)


def overhead_note(
    nodes: Sequence[OpStat],
    coverage: float | None,
    overhead: float | None,
    contention: Contention | None = None,
) -> str:
    """'profiled total 19.9 ms vs timed mean 10.2 ms: the profiler adds per-op overhead'
    when the pass says how its runs compare with the timed ones; '' otherwise. A pass
    measured on a busy machine says so first: its times are the ops' on a busy machine.

    The timed mean comes out of the pass itself: the summed node time is `coverage` of the
    profiled run, and the profiled run is (1 + overhead) times the timed one."""
    busy = ""
    if contention is not None and contention.busy:
        busy = f"profiled BUSY (others {contention.others_cpu:.1f} of {contention.cpus} CPUs)"
    total = sum(s.time_ms for s in nodes)
    if not nodes or not coverage or overhead is None or coverage <= 0 or overhead <= -1:
        return busy
    if busy:
        return f"{busy} · profiled total {total:.3g} ms"
    if overhead < -0.05:  # the timed pass ran slower: the machine's load changed between
        return f"profiled total {total:.3g} ms (faster than timed: the load changed)"
    timed = total / coverage / (1.0 + overhead)
    if overhead < 0.05:
        return f"profiled total {total:.3g} ms vs timed mean {timed:.3g} ms"
    return (
        f"profiled total {total:.3g} ms vs timed mean {timed:.3g} ms: the profiler adds "
        "per-op overhead"
    )
