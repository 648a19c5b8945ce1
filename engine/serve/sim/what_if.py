"""What if: the simulator's answer for the settings a user is trying, fast enough to
follow a slider (about a quarter of a second on two cores): the prediction at the chosen
traffic, the capacity curves of the batching in use and of the proposed one on one rate
grid, and the largest rate that meets the SLO with the proposed batching, read off the
proposed curve (its point is on it). What the answer cannot promise is said with it: past
capacity, beyond the calibrated batching, calibrated on a busy machine
(what_if_flags.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from engine.serve.batching import BatchPolicy
from engine.serve.sim.capacity_search import Scenario, capacity_curve, curve_rates, max_rate_on
from engine.serve.sim.service import ServiceModel
from engine.serve.sim.slow_stretches import stretches_text, summary
from engine.serve.sim.what_if_flags import calibration_line, flags, max_rate_text
from engine.serve.traffic.schedule import TrafficSpec

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
    "max_rate": under the SLO with the proposed batching (None without an SLO), read off
    "proposed" (`max_rate_beyond`: every rate on it met the SLO), "past_capacity",
    "utilisation" and "flags" (sentences: what the answer cannot promise), "calibration":
    how busy the machine was while it was calibrated}."""
    work = Scenario(q.spec, REQUESTS, q.seed, q.cache, q.repeat, slow_stretches=q.slow_stretches)
    offered = q.spec.mean_rate()  # a trace's, read here (off the GUI thread)
    prediction = work.run(offered, q.proposed, service)
    policies = [q.proposed] + ([q.current] if q.current is not None else [])
    top = max(service.capacity(p.max_batch, p.instances) for p in policies)
    top /= max(1.0 - q.repeat, 0.05)  # a cache lets more through
    rates = curve_rates(top, POINTS)
    proposed = capacity_curve(work, q.proposed, service, rates=rates, slo_ms=q.slo_ms or None)
    out: dict[str, Any] = {
        "offered_rate": offered,
        "prediction": prediction,
        "proposed": proposed,
        "current": capacity_curve(work, q.current, service, rates=rates) if q.current else None,
        "max_rate": None,
        "max_rate_beyond": False,
        "extrapolated": q.proposed.max_batch > max(service.sizes),
        # the process drawn from, in words (None: times drawn one by one, as asked)
        "stretches": stretches_text(summary(service.stretches)) if q.slow_stretches else None,
        "calibration": calibration_line(service.contention),
        **flags(offered, prediction, service, q.proposed),
    }
    if q.slo_ms:
        found = max_rate_on(work, q.proposed, service, q.slo_ms, proposed, steps=8)
        out["proposed"] = found.curve
        out["max_rate"] = found.rate if math.isfinite(found.rate) else None
        out["max_rate_beyond"] = found.beyond
    return out


def headline(a: dict[str, Any], traffic: str) -> str:
    """The answer in one line, as the panel shows it: the prediction at the traffic, the
    max rate under the SLO (read off the curve), the slow-stretch process when drawn from,
    and how busy the machine was while it was calibrated (a busy one is among the flags)."""
    lat = a["prediction"]["latency_ms"]
    served = a["prediction"]["throughput"]["requests_per_s"]
    parts = [
        f"SIMULATED at {traffic}: p50 {lat['p50']:.2f} ms, p99 {lat['p99']:.2f} ms, "
        f"{served:.0f} requests/s"
    ]
    said = max_rate_text(a.get("max_rate"), bool(a.get("max_rate_beyond")))
    if said:
        parts.append(said)
    if a.get("stretches"):
        parts.append(str(a["stretches"]))
    calibration = str(a.get("calibration") or "")
    if calibration and calibration not in a.get("flags", []):
        parts.append(calibration)
    return " · ".join(parts)
