"""The roofline model: where each op sits against the machine's bandwidth and compute roofs.

Pure functions. Attainable GFLOP/s at arithmetic intensity I (FLOP/byte) is
min(peak_gflops, I * peak_gbps); an op is memory-bound when I is below the machine balance
(peak_gflops / peak_gbps). Its peak fraction is achieved / attainable; an op with no FLOP
model is measured against the bandwidth roof alone (gbps / peak_gbps, "memory").
"""

from __future__ import annotations

from typing import Any

from engine.measure.op_stats import OpStat


def machine_balance(peak_gbps: float, peak_gflops: float) -> float:
    """FLOP/byte where the bandwidth roof meets the compute roof (the ridge point)."""
    return peak_gflops / peak_gbps


def attainable_gflops(intensity: float, peak_gbps: float, peak_gflops: float) -> float:
    """The roof above an op of this arithmetic intensity."""
    return min(peak_gflops, intensity * peak_gbps)


def bound_of(intensity: float | None, peak_gbps: float, peak_gflops: float) -> str:
    """ "compute" at or above the ridge point, else "memory" (also without a FLOP model)."""
    if intensity is None:
        return "memory"
    return "compute" if intensity >= machine_balance(peak_gbps, peak_gflops) else "memory"


def peak_fraction(stat: OpStat, peak_gbps: float, peak_gflops: float) -> float | None:
    """Achieved / attainable for ops with a FLOP model, else achieved GB/s / peak GB/s."""
    if stat.gflops is not None and stat.intensity is not None and stat.intensity > 0:
        roof = attainable_gflops(stat.intensity, peak_gbps, peak_gflops)
        return stat.gflops / roof if roof > 0 else None
    if stat.gbps is not None and peak_gbps > 0:
        return stat.gbps / peak_gbps
    return None


def roofline_fields(stat: OpStat, peak_gbps: float, peak_gflops: float) -> dict[str, Any]:
    """{"bound", "peak_fraction"} for one op, ready to merge into its JSON."""
    return {
        "bound": bound_of(stat.intensity, peak_gbps, peak_gflops),
        "peak_fraction": peak_fraction(stat, peak_gbps, peak_gflops),
    }


def roof_curve(
    peak_gbps: float, peak_gflops: float, lo: float = 1e-3, hi: float = 1e4
) -> tuple[list[float], list[float]]:
    """Intensities and attainable GFLOP/s of the roof's three corners over [lo, hi]."""
    ridge = machine_balance(peak_gbps, peak_gflops)
    xs = [lo, min(max(ridge, lo), hi), hi]
    return xs, [attainable_gflops(x, peak_gbps, peak_gflops) for x in xs]
