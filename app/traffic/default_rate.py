"""The Traffic dock's starting rate, from what the model was measured to serve (Qt-free):
a share of the capacity the calibration measured (its best batch up to the dock's max
batch, times the instances), else of the throughput the live latency shows at the current
batch (batch x 1000 / p50 ms); never a fixed 200/s for a model that serves 10/s. Each
comes with where it came from, in words."""

from __future__ import annotations

import math
from typing import Any

SHARE = 0.7  # of the measured capacity: busy, yet short of the queue growing without end
MIN_SAMPLES = 20  # live samples of the running config before its p50 says anything


def from_live(stats: dict[str, Any], batch: int) -> tuple[int, str] | None:
    """(rate, why) from the live plot's figures of the running config, or None while it has
    too few samples."""
    p50 = float(stats.get("p50", math.nan))
    if int(stats.get("segment", stats.get("count", 0)) or 0) < MIN_SAMPLES:
        return None
    if not math.isfinite(p50) or p50 <= 0:
        return None
    capacity = batch * 1000.0 / p50
    return _rate(capacity), (
        f"{SHARE:.0%} of {capacity:,.3g}/s, the throughput live timing measured "
        f"(p50 {p50:,.3g} ms at batch {batch})"
    )


def from_calibration(service: Any, max_batch: int, instances: int) -> tuple[int, str] | None:
    """(rate, why) from a calibration (`ServiceModel`: median service seconds per batch
    size), at the best batch up to `max_batch`, times `instances`; None without sizes."""
    sizes = [s for s in service.sizes if s <= max(max_batch, 1)] or service.sizes[:1]
    rates = [(s / service.median(s), s) for s in sizes if service.median(s) > 0]
    if not rates:
        return None
    best, at = max(rates)
    capacity = best * max(instances, 1)
    inst = f" x {instances} instances" if instances > 1 else ""
    return _rate(capacity), (
        f"{SHARE:.0%} of {capacity:,.3g}/s, the capacity the calibration measured "
        f"(batch {at}{inst})"
    )


def _rate(capacity: float) -> int:
    return max(1, round(SHARE * capacity))
