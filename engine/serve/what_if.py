"""What if: the simulator's answer for the settings a user is trying, fast enough to
follow a slider (about a quarter of a second on two cores): the prediction at the chosen
traffic, the capacity curves of the batching in use and of the proposed one on one rate
grid, and the largest rate that meets the SLO with the proposed batching."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from engine.serve.batching import BatchPolicy
from engine.serve.search import Workload, capacity_curve, curve_rates, max_rate
from engine.serve.service import ServiceModel
from engine.serve.slow_stretches import stretches_text, summary
from engine.serve.traffic import TrafficSpec

REQUESTS = 3000  # per simulated point: enough for a p99, fast enough for a slider
POINTS = 10


@dataclass(frozen=True)
class Question:
    spec: TrafficSpec
    proposed: BatchPolicy
    current: BatchPolicy | None
    cache: int = 0
    repeat: float = 0.0
    slo_ms: float | None = None
    seed: int = 0
    slow_stretches: bool = False


def answer(q: Question, service: ServiceModel) -> dict[str, Any]:
    """{"prediction": summary at the traffic, "current"/"proposed": capacity curves,
    "max_rate": under the SLO with the proposed batching (None without an SLO)}."""
    work = Workload(q.spec, REQUESTS, q.seed, q.cache, q.repeat, slow_stretches=q.slow_stretches)
    prediction = work.run(q.spec.mean_rate(), q.proposed, service)
    policies = [q.proposed] + ([q.current] if q.current is not None else [])
    top = max(service.capacity(p.max_batch, p.instances) for p in policies)
    top /= max(1.0 - q.repeat, 0.05)  # a cache lets more through
    rates = curve_rates(top, POINTS)
    out: dict[str, Any] = {
        "offered_rate": q.spec.mean_rate(),  # a trace's, read here (off the GUI thread)
        "prediction": prediction,
        "proposed": capacity_curve(work, q.proposed, service, rates=rates),
        "current": capacity_curve(work, q.current, service, rates=rates) if q.current else None,
        "max_rate": None,
        "extrapolated": q.proposed.max_batch > max(service.sizes),
        # the process drawn from, in words (None: times drawn one by one, as asked)
        "stretches": stretches_text(summary(service.stretches)) if q.slow_stretches else None,
    }
    if q.slo_ms:
        rate, _, _ = max_rate(work, q.proposed, service, q.slo_ms, steps=8)
        out["max_rate"] = rate if math.isfinite(rate) else None
    return out
