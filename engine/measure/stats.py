"""Latency statistics from raw samples: percentiles, throughput, stability.

Percentiles always come from the raw per-inference samples (never averaged), and every
summary carries its sample count.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

STABILITY_WINDOWS = 3
STABILITY_TOLERANCE = 0.10


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """Milliseconds; `count` is the number of raw samples behind every figure."""

    count: int
    mean: float
    std: float
    min: float
    p50: float
    p90: float
    p95: float
    p99: float
    max: float
    # 95% intervals of p50 and p99 from the raw samples' order statistics (None: too few)
    p50_ci: tuple[float, float] | None = None
    p99_ci: tuple[float, float] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Throughput:
    inferences_per_s: float
    samples_per_s: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def latency_stats(latencies_ns: np.ndarray) -> LatencyStats:
    """Summary of raw latencies given in nanoseconds."""
    if latencies_ns.size == 0:
        nan = float("nan")
        return LatencyStats(0, nan, nan, nan, nan, nan, nan, nan, nan)
    ms = np.asarray(latencies_ns, dtype=np.float64) / 1e6
    p50, p90, p95, p99 = np.percentile(ms, [50, 90, 95, 99])
    return LatencyStats(
        count=int(ms.size),
        mean=float(ms.mean()),
        std=float(ms.std(ddof=1)) if ms.size > 1 else 0.0,
        min=float(ms.min()),
        p50=float(p50),
        p90=float(p90),
        p95=float(p95),
        p99=float(p99),
        max=float(ms.max()),
        p50_ci=percentile_interval(ms, 50),
        p99_ci=percentile_interval(ms, 99),
    )


def percentile_interval(
    values: np.ndarray, q: float, confidence: float = 0.95
) -> tuple[float, float] | None:
    """A distribution-free interval for the q-th percentile: the order statistics whose
    ranks the binomial(n, q/100) puts the percentile between with `confidence` (normal
    approximation). It assumes independent samples, so it is a lower bound on the real
    uncertainty of a run on a machine whose speed drifts (compare's block bootstrap and
    repeated runs see that). None when there are too few samples to bound it on both sides."""
    n = int(values.size)
    p = q / 100.0
    if n < 2:
        return None
    z = float(_Z.get(confidence, 1.96))
    half = z * math.sqrt(n * p * (1 - p))
    lo, hi = math.floor(n * p - half), math.ceil(n * p + half)
    if lo < 0 or hi > n - 1 or half < 0.5:
        return None
    ordered = np.partition(np.asarray(values, dtype=np.float64), (lo, hi))
    return float(ordered[lo]), float(ordered[hi])


_Z = {0.90: 1.6449, 0.95: 1.96, 0.99: 2.5758}


def throughput(starts_ns: np.ndarray, latencies_ns: np.ndarray, batch: int) -> Throughput:
    """Inferences per wall-clock second, from the first start to the last end."""
    if latencies_ns.size == 0:
        return Throughput(0.0, 0.0)
    wall_ns = float(starts_ns[-1] + latencies_ns[-1] - starts_ns[0])
    per_s = latencies_ns.size / (wall_ns / 1e9) if wall_ns > 0 else 0.0
    return Throughput(per_s, per_s * batch)


def is_stable(
    latencies_ns: np.ndarray,
    windows: int = STABILITY_WINDOWS,
    tolerance: float = STABILITY_TOLERANCE,
) -> bool:
    """perf_analyzer's rule: the medians of the last `windows` windows agree within 10%."""
    n = latencies_ns.size
    if n < windows * 5:
        return False
    parts = np.array_split(np.asarray(latencies_ns, dtype=np.float64), windows)
    medians = np.array([np.median(p) for p in parts])
    spread = (medians.max() - medians.min()) / medians.mean()
    return bool(spread <= tolerance)


def rolling_percentiles(
    latencies_ns: np.ndarray, window: int, qs: tuple[float, ...] = (50, 90, 99)
) -> np.ndarray:
    """Percentiles of the trailing `window` samples at each point (ms); shape (n, len(qs))."""
    ms = np.asarray(latencies_ns, dtype=np.float64) / 1e6
    n = ms.size
    out = np.empty((n, len(qs)))
    if n == 0:
        return out
    if n >= window:
        view = np.lib.stride_tricks.sliding_window_view(ms, window)
        out[window - 1 :] = np.percentile(view, qs, axis=1).T
    for i in range(min(window - 1, n)):
        out[i] = np.percentile(ms[: i + 1], qs)
    return out
