"""What the op table says beyond each OpStat's own numbers: the bound column against the
machine's roofs, the short provider name, and the header's word on profiler overhead.
Qt-free, so the wording is tested without a window."""

from __future__ import annotations

from collections.abc import Sequence

from engine.api import OpStat, bound_of, peak_fraction

Peaks = tuple[float, float]  # GB/s, GFLOP/s


def bound_text(stat: OpStat, peaks: Peaks | None) -> str:
    """'memory 34%' or 'compute 71%': which roof is above the op and how close it gets;
    '–' before the machine's peaks are measured."""
    if peaks is None:
        return "–"
    bound = bound_of(stat.intensity, *peaks)
    frac = peak_fraction(stat, *peaks)
    if frac is not None and frac > 1.0:  # integer arithmetic outruns the FP32 peak
        return f"{bound} >roof"
    return bound if frac is None else f"{bound} {frac:.0%}"


def bound_sort_key(stat: OpStat, peaks: Peaks | None) -> float:
    """Sorts by the fraction of the roof reached (−inf when unknown)."""
    frac = peak_fraction(stat, *peaks) if peaks else None
    return float("-inf") if frac is None else frac


def bound_tip(stat: OpStat, peaks: Peaks | None) -> str:
    if peaks is None:
        return "The machine's peaks are being measured; the bound follows."
    gbps, gflops = peaks
    ridge = gflops / gbps
    frac = peak_fraction(stat, *peaks)
    if stat.intensity is None:
        return (
            f"No FLOP model for {stat.op_type}: measured against the bandwidth roof alone "
            f"({stat.gbps or 0:.2f} of {gbps:.1f} GB/s)."
        )
    side = "below" if stat.intensity < ridge else "at or above"
    reached = f" It reaches {frac:.0%} of the roof above it." if frac is not None else ""
    if frac is not None and frac > 1.0:
        reached = (
            f" It runs at {frac:.1f}x the roof above it: the roofs are this machine's FP32 "
            "peaks, and integer (INT8) arithmetic can go faster than they do."
        )
    return (
        f"{stat.intensity:.2f} FLOP/B is {side} the ridge point ({ridge:.1f} FLOP/B): "
        f"{bound_of(stat.intensity, *peaks)}-bound.{reached}"
    )


def short_provider(provider: str) -> str:
    """'CPUExecutionProvider' -> 'CPU' (several: 'CPU,CUDA')."""
    return ",".join(p.removesuffix("ExecutionProvider") for p in provider.split(",") if p)


def overhead_note(nodes: Sequence[OpStat], coverage: float | None, overhead: float | None) -> str:
    """'profiled total 19.9 ms vs timed mean 10.2 ms: the profiler adds per-op overhead'
    when the pass says how its runs compare with the timed ones; '' otherwise.

    The timed mean comes out of the pass itself: the summed node time is `coverage` of the
    profiled run, and the profiled run is (1 + overhead) times the timed one."""
    total = sum(s.time_ms for s in nodes)
    if not nodes or not coverage or overhead is None or coverage <= 0 or overhead <= -1:
        return ""
    timed = total / coverage / (1.0 + overhead)
    if overhead < 0.05:
        return f"profiled total {total:.3g} ms vs timed mean {timed:.3g} ms"
    return (
        f"profiled total {total:.3g} ms vs timed mean {timed:.3g} ms: the profiler adds "
        "per-op overhead"
    )
