"""Seeded simulator cases whose records are stored in tests/fixtures/sim_records.npz
(written by tests/fixtures/make_sim_records.py): a speed-up of the simulator must give
bit-identical records on them."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from engine.serve.batching import BatchPolicy
from engine.serve.sim.lateness import ANY, FULL, PARKED, RUNNING
from engine.serve.sim.service import ServiceModel
from engine.serve.traffic.schedule import Schedule, make_schedule, parse_traffic

FIELDS = (
    "scheduled",
    "sent",
    "dequeued",
    "done",
    "batch",
    "hit",
    "outcome",
    "batch_start",
    "batch_end",
    "batch_size",
    "batch_instance",
)
Case = tuple[Schedule, BatchPolicy, ServiceModel, dict[str, Any]]


def _service(calibrated: bool) -> ServiceModel:
    """Batch times for sizes 1, 4 and 8; `calibrated` adds what a calibration measures
    beyond them (idle slowdowns, the sender's lateness)."""
    rng = np.random.default_rng(3)
    samples = {s: rng.gamma(4, 0.3e-3 * s**0.6, 200) for s in (1, 4, 8)}
    if not calibrated:
        return ServiceModel(samples, {})
    idle = {1: {1e-3: 1.0 + 0.5 * rng.random(30), 5e-3: 1.3 + rng.random(30)}}
    return ServiceModel(samples, {}, idle, {RUNNING: rng.gamma(2, 20e-6, 100)})


def late_service() -> ServiceModel:
    """`_service(True)` with the lateness a calibration measures now: the sender's and the
    batcher's wake-up, each by the server's state (none while every instance is busy),
    the instances' turnaround between batches, and batch times by the batch before."""
    rng = np.random.default_rng(4)
    base = _service(True)
    send = {
        FULL: np.zeros(20),
        RUNNING: rng.gamma(2, 15e-6, 60),
        0.001: rng.gamma(2, 40e-6, 60),
        0.005: rng.gamma(2, 70e-6, 60),
    }
    wake = {RUNNING: rng.gamma(3, 20e-6, 60), 1e-9: rng.gamma(3, 30e-6, 60)}
    turn = {1: rng.gamma(4, 3e-6, 30), 2: rng.gamma(4, 5e-6, 30), 8: rng.gamma(8, 8e-6, 30)}
    larger = {n: v * 1.05 for n, v in base.samples.items() if n < 8}  # slower after larger
    same = {n: v * 0.99 for n, v in base.samples.items()}
    return ServiceModel(
        base.samples,
        {},
        base.idle_slowdown,
        send,
        wake_late=wake,
        turnaround=turn,
        after_larger=larger,
        after_same=same,
    )


def parked_service() -> ServiceModel:
    """`late_service()` as calibration version 16 measures it: sends parked (none late)
    apart from those due while every instance runs with the generator awake, and the
    batcher's wake-up one pool for every state."""
    base = late_service()
    rng = np.random.default_rng(5)
    send = {**base.send_late, PARKED: np.zeros(20), FULL: rng.gamma(2, 20e-6, 60)}
    wake = {ANY: np.concatenate(list(base.wake_late.values()))}
    return dataclasses.replace(base, send_late=send, wake_late=wake)


def cases() -> dict[str, Case]:
    bursts = parse_traffic("bursts:1500,9000,0.2,0.3")
    sched = make_schedule(bursts, 0, seed=11, repeat=0.4, requests=1000)
    return {
        # the general loop: cache, 2 instances, timeouts and a queue limit
        "cache_2_instances_timeout_limit": (
            sched,
            BatchPolicy(
                max_batch=8,
                preferred=(4,),
                delay_ms=1.0,
                queue_limit=40,
                timeout_ms=6.0,
                instances=2,
            ),
            _service(True),
            {"cache_size": 200, "seed": 5},
        ),
        "cache_3_instances_plain_service": (
            sched,
            BatchPolicy(max_batch=8, delay_ms=0.5, queue_limit=12, timeout_ms=1.5, instances=3),
            _service(False),
            {"cache_size": 50, "seed": 6},
        ),
        # the fast loop: no cache, no queue limit
        "open_timeout_preferred": (
            sched,
            BatchPolicy(max_batch=8, preferred=(4,), delay_ms=2.0, timeout_ms=8.0),
            _service(True),
            {"seed": 7},
        ),
        "batch_1_two_instances": (
            sched,
            BatchPolicy(instances=2),
            _service(False),
            {"seed": 8},
        ),
        # lateness by the server's state: the fast loop, the general one, a closed loop
        "open_lateness_by_state": (
            sched,
            BatchPolicy(max_batch=8, delay_ms=2.0),
            late_service(),
            {"seed": 10},
        ),
        "queue_lateness_by_state": (
            sched,
            BatchPolicy(max_batch=8, preferred=(4,), delay_ms=1.0, queue_limit=30, instances=2),
            late_service(),
            {"cache_size": 100, "seed": 11},
        ),
        "closed_lateness_by_state": (
            sched,
            BatchPolicy(max_batch=4, delay_ms=1.0),
            late_service(),
            {"closed_clients": 6, "closed_requests": 800, "seed": 12},
        ),
        # the generator parked only when every instance ran since it last looked
        "open_parked_by_last_look": (
            sched,
            BatchPolicy(max_batch=8, delay_ms=2.0),
            parked_service(),
            {"seed": 13},
        ),
        "queue_parked_by_last_look": (
            sched,
            BatchPolicy(max_batch=8, preferred=(4,), delay_ms=1.0, queue_limit=30, instances=2),
            parked_service(),
            {"cache_size": 100, "seed": 14},
        ),
        # a closed loop with a cache
        "closed_cache": (
            sched,
            BatchPolicy(max_batch=4, delay_ms=1.0, timeout_ms=5.0),
            _service(True),
            {"cache_size": 100, "closed_clients": 12, "closed_requests": 800, "seed": 9},
        ),
    }
