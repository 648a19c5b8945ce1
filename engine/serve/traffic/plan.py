"""A run's traffic planned from its settings, in one place: the spec, and the schedule its
requests are drawn from (an open loop's arrivals and keys; a closed loop's keys only, its
clients sending as they are answered). A load run is planned with it by its job, and by
`opscope load` before the job (to check the flags in their words and fit the warm-up) from
the very request it sends the job (engine/run/serving_jobs.py: load_schedule);
`opscope simulate` plans its traffic with it too."""

from __future__ import annotations

from engine.errors import ConfigError
from engine.serve.traffic.schedule import Schedule, TrafficSpec, make_schedule, parse_traffic


def plan_traffic(
    traffic: str,
    duration_s: float,
    seed: int,
    repeat: float,
    requests: int | None,
    closed_requests: int,
    repeat_name: str = "repeat",
) -> tuple[TrafficSpec, Schedule]:
    """`traffic` (a spec: poisson:RATE, bursts:..., trace:FILE, closed:N) and its schedule:
    open loop, `duration_s` of arrivals (or the first `requests`); closed loop,
    `closed_requests` content keys. `repeat`: the share of requests that repeat an earlier
    one (below 1; `repeat_name` names it in the error)."""
    spec = parse_traffic(traffic)
    if repeat >= 1:
        raise ConfigError(f"{repeat_name} must be below 1, got {repeat:g}")
    if spec.closed:
        schedule = make_schedule(parse_traffic("constant:1"), 0, seed, repeat,
                                 requests=closed_requests)  # fmt: skip
    else:
        schedule = make_schedule(spec, duration_s, seed, repeat, requests=requests)
    return spec, schedule
