"""What a batch costs after the server sat idle, taken from the real serving loop: short
runs (half the calibrated capacity; 40 requests a second; then over capacity, for the
turnaround between back-to-back batches; these runs also keep the lateness of
sim/lateness.py), their batches grouped by size and by the idle gap before them (no
batch running on any instance), as ratios to the size's back-to-back median. Timed in
isolation instead (a sleep, then a batch), the demo CNN's batches of 2 ran 1.74-1.94x
slower after any pause of 0.5-20 ms and the simulator charged that, while the loop's own
batches after such gaps ran 1.01-1.05x: it predicted p50s 7-21% high. Long gaps are real:
batches of 1 after 5-20 ms ran 1.8x, after more than 20 ms 2.0x, in the loop as in
isolation."""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from engine.events import Event, Progress
from engine.serve.loop import ServingLoop
from engine.serve.records import ServeRecords
from engine.serve.setup import Serving
from engine.serve.sim.lateness import (
    Lateness,
    bucketed,
    by_size,
    one_pool,
    send_samples,
    turnaround_samples,
    wake_samples,
)
from engine.serve.sim.service import IDLE_FROM_S, PROGRESS_S, ServiceModel
from engine.serve.traffic.schedule import make_schedule, parse_traffic

HALF_S = 2.0  # seconds at half the calibrated capacity: idle gaps up to a few batches
SLOW_S, SLOW_RATE = 1.0, 40.0  # seconds at 40 requests a second: gaps of tens of ms
FULL_S, OVER = 0.5, 1.2  # seconds at 1.2x the capacity: max-size batches back to back
GAPS_S = (IDLE_FROM_S, 0.001, 0.002, 0.005, 0.02)  # lower edges of the idle-gap buckets
SKIP_S = 0.3  # a run's first batches are not steady state
WAKE_DELAY_S = 0.001  # the least batcher delay in these runs (its expiries' lateness)
MIN_BATCHES = 8  # fewer in a (size, gap) cell: no ratio for it

IdleSlowdown = dict[int, dict[float, np.ndarray]]


@dataclass(frozen=True)
class LoopRatios:
    """What the short real runs showed: the slowdown after idle gaps, how late sends were
    by the server's state, and how late the batcher's delay expiries were, one pool
    (sim/lateness.py)."""

    idle: IdleSlowdown
    send_late: Lateness
    wake_late: Lateness
    turnaround: dict[int, np.ndarray]  # by the ended batch's size (s)


def loop_runs(capacity: float) -> list[tuple[float, float]]:
    """(seconds, requests/s) of the short real runs, for a calibrated `capacity`."""
    return [(HALF_S, 0.5 * capacity), (SLOW_S, SLOW_RATE), (FULL_S, OVER * capacity)]


def expected_s(capacity: float) -> float:
    """About how long the short real runs take: a run past capacity lasts until its
    requests are served (SLOW_RATE is past it for a slow model)."""
    return sum(s * max(1.0, r / capacity) for s, r in loop_runs(capacity)) if capacity > 0 else 0


def measure_idle_slowdown(
    serving: Serving, model: ServiceModel, should_stop: Callable[[], bool] = lambda: False
) -> Iterator[Event | LoopRatios]:
    """Serve Poisson traffic on the real loop (HALF_S, SLOW_S, then FULL_S over capacity:
    batches of the max size back to back); yields progress (in expected seconds, as
    `calibrate` does), then the ratios of the runs together (see `idle_ratios`), their
    lateness and turnarounds. The batcher's delay is at least WAKE_DELAY_S, so that its
    expiries are timed whatever the policy (a calibration serves every delay).
    `should_stop()` true: the run stops at once and nothing is yielded after."""
    top = min(serving.policy.max_batch, max(model.sizes))  # no batch larger than timed
    policy = dataclasses.replace(
        serving.policy,
        max_batch=top,
        preferred=tuple(p for p in serving.policy.preferred if p <= top),
        delay_ms=max(serving.policy.delay_ms, WAKE_DELAY_S * 1e3),
    )
    send: list[tuple[np.ndarray, np.ndarray]] = []
    wake: list[tuple[np.ndarray, np.ndarray]] = []
    turn: list[tuple[np.ndarray, np.ndarray]] = []
    capacity = model.capacity(policy.max_batch, policy.instances)
    runs = loop_runs(capacity)
    total, done = expected_s(capacity), 0.0
    cells: dict[tuple[int, float], list[np.ndarray]] = {}
    for k, (seconds, rate) in enumerate(runs):
        said = "batches after idling" if rate < capacity else "batches back to back"
        said = f"serving {rate:.0f}/s on the real loop ({k + 1} of {len(runs)}): {said}"
        expect = seconds * max(1.0, rate / capacity)
        yield Progress("calibrate", done, total, said)
        schedule = make_schedule(parse_traffic(f"poisson:{rate:.3f}"), seconds, seed=3 + k)
        loop = ServingLoop(serving.run_batch, serving.request_feeds, schedule, policy)
        t0 = last = time.perf_counter()
        for _ in loop.run():
            if should_stop():
                loop.cancel()
            elif time.perf_counter() - last >= PROGRESS_S:
                last = time.perf_counter()
                ran = min(last - t0, expect)
                yield Progress("calibrate", done + ran, total, said)
        if should_stop():
            return
        done += expect
        rec = loop.records()
        send.append(send_samples(rec, policy.instances, policy.max_batch, policy.preferred,
                                 policy.delay_s))  # fmt: skip
        wake.append(wake_samples(rec, policy.delay_s, policy.instances))
        turn.append(turnaround_samples(rec, policy.max_batch, policy.preferred, policy.delay_s))
        for n, by in idle_ratios(rec, model, least=1).items():
            for gap, ratios in by.items():
                cells.setdefault((n, gap), []).append(ratios)
    out: IdleSlowdown = {}
    for (n, gap), parts in sorted(cells.items()):
        ratios = np.concatenate(parts)
        if ratios.size >= MIN_BATCHES:
            out.setdefault(n, {})[gap] = ratios
    yield LoopRatios(out, pooled(send), one_pool(wake), by_size(turn))


def pooled(parts: list[tuple[np.ndarray, np.ndarray]]) -> Lateness:
    """(lateness, states) pairs of several runs, bucketed together."""
    return bucketed(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))


def idle_ratios(
    rec: ServeRecords,
    model: ServiceModel,
    gaps: tuple[float, ...] = GAPS_S,
    least: int = MIN_BATCHES,
) -> IdleSlowdown:
    """For each batch size, for each gap bucket [gaps[i], gaps[i+1]) (the last open-ended)
    with `least` batches or more after SKIP_S: their durations over the size's
    back-to-back median."""
    start, end, size = rec.batch_start, rec.batch_end, rec.batch_size
    order = np.argsort(start, kind="stable")
    start, end, size = start[order], end[order], size[order]
    ended_before = np.maximum.accumulate(np.r_[-np.inf, end[:-1]])  # latest end so far
    gap = start - ended_before
    took = end - start
    steady = start >= SKIP_S
    edges = (*gaps, np.inf)
    out: IdleSlowdown = {}
    for n in np.unique(size[steady]):
        base = model.median(int(n))
        by: dict[float, np.ndarray] = {}
        for lo, hi in itertools.pairwise(edges):
            cell = steady & (size == n) & (gap >= lo) & (gap < hi)
            if cell.sum() >= least:
                by[float(lo)] = took[cell] / base
        if by:
            out[int(n)] = by
    return out
