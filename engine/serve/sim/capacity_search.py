"""Questions answered on the simulator: the largest rate that meets a p99 target, the
batching with the most capacity under it, and the capacity curve with its knee."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.errors import ConfigError
from engine.events import Progress
from engine.serve.batching import BatchPolicy
from engine.serve.records import summarize
from engine.serve.sim.service import ServiceModel
from engine.serve.sim.simulate import simulate
from engine.serve.traffic.schedule import TrafficSpec, make_schedule

SEARCH_STEPS = 10  # bisection steps within a grid step: the rate to within ~0.01%
TUNE_STEPS = 6  # per batching trial, within a grid step: ~0.5%, plenty to rank the trials
TUNE_POINTS = 6  # rates on each trial's grid


@dataclass(frozen=True)
class Scenario:
    """A simulated run but its rate: the traffic's shape, the cache (the rate is what the
    searches vary)."""

    spec: TrafficSpec
    requests: int
    seed: int = 0
    cache_size: int = 0
    repeat: float = 0.0
    warmup_s: float = 0.0
    slow_stretches: bool = False  # service times from the slow-stretch process

    def run(self, rate: float, policy: BatchPolicy, service: ServiceModel) -> dict[str, Any]:
        spec = self.spec.scaled(rate / self.spec.mean_rate())
        schedule = make_schedule(spec, 0.0, self.seed, self.repeat, requests=self.requests)
        rec = simulate(schedule, policy, service, cache_size=self.cache_size, seed=self.seed,
                       slow_stretches=self.slow_stretches)  # fmt: skip
        return summarize(rec, self.warmup_s)


def meets(summary: dict[str, Any], slo_ms: float) -> bool:
    """p99 within the target, and nothing rejected or timed out."""
    req = summary["requests"]
    p99 = summary["latency_ms"]["p99"]
    return bool(req["rejected"] == 0 and req["timed_out"] == 0 and p99 <= slo_ms)


def slo_floor_ms(service: ServiceModel, repeat: float = 0.0) -> float:
    """The least p99 any rate or batching can reach (ms): a request the model serves takes
    at least the quickest batch ever measured, and unless cache hits could be 99% of the
    requests (`repeat`, the share that repeat an earlier one), the p99 is such a request."""
    if repeat >= 0.99:
        return 0.0
    quickest = [float(np.min(s)) for s in service.samples.values() if np.size(s)]
    return 1e3 * min(quickest) if quickest else 0.0


def check_reachable(slo_ms: float, floor_ms: float) -> None:
    """A p99 target no setting can meet, refused in one line before any search (the
    search for one ran with no end: ever-lower rates, each simulated in full)."""
    if slo_ms < floor_ms:
        raise ConfigError(
            f"--slo-p99 {slo_ms:g} ms: below the quickest a request is served ({floor_ms:.3g} "
            "ms, the fastest batch measured); no rate or batching meets it"
        )


GRID_POINTS = 16  # rates on the curve the max rate is read off when no curve is given


@dataclass(frozen=True)
class MaxRate:
    """The largest rate under an SLO as read off a capacity curve: `curve` is that curve
    with the max rate's own point in it (marked "max_rate"), so that every point at or
    below `rate` meets the SLO and the next one above does not; `beyond`: every rate on the
    curve met it (the max lies past its last point)."""

    rate: float
    summary: dict[str, Any] | None
    tried: list[dict[str, float]]
    curve: list[dict[str, Any]]
    beyond: bool = False


def max_rate(
    work: Scenario,
    policy: BatchPolicy,
    service: ServiceModel,
    slo_ms: float,
    steps: int = SEARCH_STEPS,
    points: int = GRID_POINTS,
) -> tuple[float, dict[str, Any] | None, list[dict[str, float]]]:
    """The largest mean rate (requests/s) whose simulated p99 meets `slo_ms`, read off a
    capacity curve of `points` rates and refined (`max_rate_on`). Returns the rate (0 if
    even the lightest misses), its summary, and every refining step tried."""
    found = max_rate_on(work, policy, service, slo_ms, capacity_curve(work, policy, service,
                        points, slo_ms=slo_ms), steps)  # fmt: skip
    return found.rate, found.summary, found.tried


def max_rate_on(
    work: Scenario,
    policy: BatchPolicy,
    service: ServiceModel,
    slo_ms: float,
    curve: list[dict[str, Any]],
    steps: int = SEARCH_STEPS,
) -> MaxRate:
    """The max rate under `slo_ms` read off `curve` (points of `capacity_curve` for this
    workload, policy and service): the rate just below the curve's first point that misses,
    found by bisection between it and the point before (0 when none is before), on the
    same simulation as the curve's points. A bisection of its own over 0-2x capacity said
    "max rate 1/s" beside a curve whose 1.2/s point missed: p99 is not monotonic in the rate
    (a server idle between requests runs slower), and a bisection finds any crossing."""
    for p in curve:
        if "meets" not in p:
            p["meets"] = bool(p["p99_ms"] <= slo_ms)
    miss = next((i for i, p in enumerate(curve) if not p["meets"]), None)
    if miss is None:  # every rate on the curve meets the SLO
        top = curve[-1]["offered_per_s"] if curve else 0.0
        summary = work.run(top, policy, service) if curve else None
        return MaxRate(top, summary, [], [dict(p) for p in curve], beyond=bool(curve))
    lo = curve[miss - 1]["offered_per_s"] if miss else 0.0
    hi = curve[miss]["offered_per_s"]
    best = work.run(lo, policy, service) if miss else None
    tried: list[dict[str, float]] = []
    for _ in range(steps):
        rate = 0.5 * (lo + hi)
        summary = work.run(rate, policy, service)
        ok = meets(summary, slo_ms)
        tried.append({"rate": rate, "p99_ms": summary["latency_ms"]["p99"], "meets": float(ok)})
        if ok:
            lo, best = rate, summary
        else:
            hi = rate
    out = [dict(p) for p in curve]
    if best is not None and lo not in [p["offered_per_s"] for p in curve]:
        out.insert(miss, {**curve_point(lo, best), "meets": True, "max_rate": True})
    elif best is not None:
        out[miss - 1]["max_rate"] = True
    return MaxRate(lo, best, tried, out)


def tune_batching(
    work: Scenario,
    base: BatchPolicy,
    service_for: Callable[[int], ServiceModel],
    slo_ms: float,
    max_batches: list[int],
    delays_ms: list[float],
    instances: list[int],
) -> Iterator[Progress | dict[str, Any]]:
    """Every max batch x queue delay x instance count: its max rate under the SLO.
    Yields progress, then {"best": trial, "trials": [...]} (most capacity first)."""
    # a max batch of 1 never waits (one request is a full batch), so its delays are one trial
    grid = [
        (b, d, k)
        for k in instances
        for b in max_batches
        for d in (delays_ms if b > 1 else delays_ms[:1])
    ]
    trials: list[dict[str, Any]] = []
    t0 = time.monotonic()
    for i, (b, d, k) in enumerate(grid):
        left = f", about {(time.monotonic() - t0) / i * (len(grid) - i):.0f} s left" if i else ""
        yield Progress(
            "tune", i, len(grid), f"max batch {b}, delay {d:g} ms, {k} instance(s){left}"
        )
        policy = dataclasses.replace(
            base,
            max_batch=b,
            delay_ms=d,
            instances=k,
            preferred=tuple(p for p in base.preferred if p <= b),
        )
        rate, summary, _ = max_rate(work, policy, service_for(k), slo_ms, TUNE_STEPS, TUNE_POINTS)
        trials.append(
            {
                "max_batch": b,
                "delay_ms": d,
                "instances": k,
                "max_rate": rate,
                "p99_ms": summary["latency_ms"]["p99"] if summary else math.nan,
                "p50_ms": summary["latency_ms"]["p50"] if summary else math.nan,
                "batch_mean": summary["batch_size"]["mean"] if summary else math.nan,
            }
        )
    trials.sort(key=lambda t: (-t["max_rate"], t["p99_ms"]))
    yield {"best": trials[0] if trials else None, "trials": trials}


def capacity_curve(
    work: Scenario,
    policy: BatchPolicy,
    service: ServiceModel,
    points: int = 16,
    rates: list[float] | None = None,
    slo_ms: float | None = None,
) -> list[dict[str, Any]]:
    """Offered rate from 5% to 130% of the full-batch capacity (more with a cache: the hits
    skip the model), or `rates`, against p50, p99 and achieved throughput; the knee is the
    first rate where throughput falls 5% short of the offered rate or p99 passes three
    times its value at the lightest load.
    With `slo_ms`, each point says whether it meets it (`meets`: p99 within, nothing
    rejected or timed out)."""
    if rates is None:
        cap = service.capacity(policy.max_batch, policy.instances)
        rates = curve_rates(cap / max(1.0 - work.repeat, 0.05), points)
    curve: list[dict[str, Any]] = []
    for rate in rates:
        s = work.run(rate, policy, service)
        point = curve_point(rate, s)
        if slo_ms is not None:
            point["meets"] = meets(s, slo_ms)
        curve.append(point)
    if not curve:
        return curve
    base_p99 = curve[0]["p99_ms"]
    for point in curve:
        if (
            point["throughput_per_s"] < 0.95 * point["offered_per_s"]
            or point["p99_ms"] > 3 * base_p99
        ):
            point["knee"] = True
            break
    return curve


def curve_point(rate: float, s: dict[str, Any]) -> dict[str, Any]:
    """One point of a capacity curve from its simulated summary."""
    return {
        "offered_per_s": rate,
        "throughput_per_s": s["throughput"]["requests_per_s"],
        "p50_ms": s["latency_ms"]["p50"],
        "p99_ms": s["latency_ms"]["p99"],
        "knee": False,
    }


def curve_rates(capacity: float, points: int = 16) -> list[float]:
    """5% to 130% of `capacity`, evenly."""
    return [capacity * (0.05 + 1.25 * i / (points - 1)) for i in range(points)]
