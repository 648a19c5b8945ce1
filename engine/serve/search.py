"""Questions answered on the simulator: the largest rate that meets a p99 target, the
batching with the most capacity under it, and the capacity curve with its knee."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from engine.events import Progress
from engine.serve.batching import BatchPolicy
from engine.serve.records import summarize
from engine.serve.service import ServiceModel
from engine.serve.simulate import simulate
from engine.serve.traffic import TrafficSpec, make_schedule

SEARCH_STEPS = 14  # bisection steps: the rate to within ~0.01% of the bracket
TUNE_STEPS = 9  # per batching trial: within ~0.4%, plenty to rank the trials


@dataclass(frozen=True)
class Workload:
    """Everything about a simulated run but the rate: the traffic's shape, the cache."""

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


def max_rate(
    work: Workload,
    policy: BatchPolicy,
    service: ServiceModel,
    slo_ms: float,
    steps: int = SEARCH_STEPS,
) -> tuple[float, dict[str, Any] | None, list[dict[str, float]]]:
    """The largest mean rate (requests/s) whose simulated p99 meets `slo_ms`: bisection
    between 0 and twice the full-batch capacity (latency grows with load). Returns the
    rate (0 if even a trickle misses), its summary, and every step tried."""
    hi = 2.0 * service.capacity(policy.max_batch, policy.instances) / max(1.0 - work.repeat, 0.05)
    lo, best = 0.0, None
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
    return lo, best, tried


def tune_batching(
    work: Workload,
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
        rate, summary, _ = max_rate(work, policy, service_for(k), slo_ms, TUNE_STEPS)
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
    work: Workload,
    policy: BatchPolicy,
    service: ServiceModel,
    points: int = 16,
    rates: list[float] | None = None,
) -> list[dict[str, Any]]:
    """Offered rate from 5% to 130% of the full-batch capacity (or `rates`) against p50,
    p99 and achieved throughput; the knee is the first rate where throughput falls 5%
    short of the offered rate or p99 passes three times its value at the lightest load."""
    if rates is None:
        cap = service.capacity(policy.max_batch, policy.instances)
        rates = curve_rates(cap, points)
    curve: list[dict[str, Any]] = []
    for rate in rates:
        s = work.run(rate, policy, service)
        served = s["throughput"]["requests_per_s"]
        curve.append(
            {
                "offered_per_s": rate,
                "throughput_per_s": served,
                "p50_ms": s["latency_ms"]["p50"],
                "p99_ms": s["latency_ms"]["p99"],
                "knee": False,
            }
        )
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


def curve_rates(capacity: float, points: int = 16) -> list[float]:
    """5% to 130% of `capacity`, evenly."""
    return [capacity * (0.05 + 1.25 * i / (points - 1)) for i in range(points)]
