"""A serving run described as JSON and as the events a session files it from: one shape
for the CLI (`opscope load`, `opscope simulate`) and the app's engine host."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from engine.events import Event, ServingStarted, ServingSummary
from engine.measure.contention import Window
from engine.serve.batching import BatchPolicy
from engine.serve.loop import ServingLoop
from engine.serve.records import summarize
from engine.serve.traffic.schedule import TrafficSpec

SUMMARY_KEYS = (
    "requests", "warmup_s", "latency_ms", "queue_ms", "service_ms", "batch_size",
    "throughput", "goodput", "queue_depth", "generator", "duration_s", "cache", "machine",
)  # fmt: skip
ANSWER_KEYS = ("max_rate", "find", "trials", "best", "curve")


def describe_setup(
    spec: TrafficSpec,
    policy: BatchPolicy,
    *,
    seed: int,
    duration_s: float | None,
    cache: int,
    repeat: float,
) -> dict[str, Any]:
    """traffic, batching and cache as `--json` writes them."""
    return {
        "traffic": {
            **spec.to_json(),
            "closed_loop": spec.closed,
            "seed": seed,
            "duration_s": None if spec.closed else duration_s,
        },
        "batching": policy.to_json(),
        "cache": {"size": cache, "repeat": repeat},
    }


def hit_rate(result: dict[str, Any]) -> None:
    req = result["requests"]
    result["cache"]["hit_rate"] = req["cache_hits"] / req["sent"] if req["sent"] else 0.0


def serving_started(
    setup: dict[str, Any], warmup_s: float, calibration: dict[str, Any] | None = None
) -> ServingStarted:
    return ServingStarted(
        traffic=setup["traffic"],
        batching=setup["batching"],
        cache=setup["cache"],
        warmup_s=warmup_s,
        simulated=calibration is not None,
        calibration=calibration,
    )


def figures(result: dict[str, Any]) -> dict[str, Any]:
    """What a session keeps of a serving result: the figures (the set-up has its columns)."""
    return {k: result[k] for k in SUMMARY_KEYS if k in result}


def served(
    loop: ServingLoop, setup: dict[str, Any], warmup_s: float, slo_ms: float | None = None
) -> Generator[Event, None, dict[str, Any]]:
    """A real serving run as a session files it: ServingStarted, the loop's events (every
    request and batch as they end), ServingSummary; returns the figures with the set-up
    (the CLI and the app's engine host both serve through this), and how busy the machine
    was meanwhile (`machine.contention`: a busy run explains a miss of its prediction)."""
    yield serving_started(setup, warmup_s)
    window = Window()
    yield from loop.run()
    contention = window.done()
    result = {**setup, **summarize(loop.records(), warmup_s, slo_ms)}
    # planned and never sent (a stop, the drain deadline): counted, not silently gone
    result["requests"]["dropped"] = loop.dropped
    if contention is not None:
        result["machine"] = {"contention": contention.to_json()}
    hit_rate(result)
    yield ServingSummary(figures(result))
    return result
