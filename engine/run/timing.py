"""The timing pass: warm-up discarded, then raw per-inference latencies until both a
minimum count and a minimum duration are reached.

The loop is as bare as a hand-written ONNX Runtime loop: two clock reads and two list
appends per inference; batches of samples are yielded about ten times a second. The lists
hold only the batch being filled: a yielded batch is kept as two int64 arrays (16 bytes a
sample instead of ~76 as Python ints), and only by a plan that ends on its own and so
needs every sample for its summary; an open-ended plan (the live engine) keeps none.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from engine.events import ContentionSample, LatencyBatch, Progress, TimingDone
from engine.measure.contention import LoadTotal, Window
from engine.measure.stats import is_stable, latency_stats, throughput

Clock = Callable[[], int]


@dataclass(frozen=True, slots=True)
class TimingPlan:
    warmup_runs: int = 10
    warmup_s: float = 0.5
    min_runs: int = 50
    duration_s: float = 5.0  # float("inf") runs until the consumer stops
    batch_interval_s: float = 0.1
    max_runs: int | None = None
    contention_interval_s: float = 1.0  # how often the machine's load is read (a window)


@dataclass
class TimingSamples:
    """Everything the timing pass measured, raw."""

    starts_ns: np.ndarray
    latencies_ns: np.ndarray


def time_inferences(
    run_once: Callable[[], object],
    plan: TimingPlan,
    batch: int,
    clock: Clock = time.perf_counter_ns,
    samples: TimingSamples | None = None,
    window: Window | None = None,
) -> Iterator[Progress | LatencyBatch | ContentionSample | TimingDone]:
    """Run `run_once` repeatedly; yield progress, sample batches, how busy the machine was
    (a `ContentionSample` about every `plan.contention_interval_s`, read between samples,
    never inside one) and a final summary carrying the whole pass's contention.

    If `samples` is given it is filled with every raw sample (for the caller's records).
    Closing the generator stops timing at the next batch boundary.
    """
    warm = 0
    t_start = clock()
    warm_end = t_start + int(plan.warmup_s * 1e9)
    while warm < plan.warmup_runs or clock() < warm_end:
        run_once()
        warm += 1
        if warm % 10 == 0:
            yield Progress(
                "warmup", min(warm, plan.warmup_runs), plan.warmup_runs, f"warm-up {warm} runs"
            )
    yield Progress("warmup", plan.warmup_runs, plan.warmup_runs, f"warm-up done ({warm} runs)")

    starts: list[int] = []
    lats: list[int] = []
    s_append = starts.append
    l_append = lats.append
    sent = 0  # samples yielded so far
    keep = ends_on_its_own(plan) or samples is not None
    kept: list[LatencyBatch] = []
    interval = int(plan.batch_interval_s * 1e9)
    origin = clock()
    load = window or Window()
    # the load so far as running sums (the figure `combine` makes of every window), so an
    # open-ended (live) timing holds none of its windows
    loaded = LoadTotal()
    lap_every = int(plan.contention_interval_s * 1e9)
    next_lap = origin + lap_every
    min_end = origin + int(plan.duration_s * 1e9) if plan.duration_s != float("inf") else None
    next_flush = origin + interval
    max_runs = plan.max_runs or 0
    while True:
        t0 = clock()
        run_once()
        t1 = clock()
        s_append(t0 - origin)
        l_append(t1 - t0)
        if t1 < next_flush:
            continue
        next_flush = t1 + interval
        batch_ev = _batch(starts, lats, origin)
        sent += batch_ev.latencies_ns.size
        if keep:
            kept.append(batch_ev)
        yield batch_ev
        if t1 >= next_lap:
            next_lap = t1 + lap_every
            lap = load.lap()
            if lap is not None:
                loaded.add(lap)
                yield ContentionSample(t1, lap)
        if min_end is not None and t1 >= min_end and sent >= plan.min_runs:
            break
        if max_runs and sent >= max_runs:
            break
    if lats:
        batch_ev = _batch(starts, lats, origin)
        kept.append(batch_ev)
        yield batch_ev
    last = load.lap()
    if last is not None:
        loaded.add(last)
        yield ContentionSample(clock(), last)
    st = np.concatenate([b.starts_ns for b in kept]) if kept else np.empty(0, np.int64)
    lt = np.concatenate([b.latencies_ns for b in kept]) if kept else np.empty(0, np.int64)
    if samples is not None:
        samples.starts_ns = st
        samples.latencies_ns = lt
    yield TimingDone(
        latency=latency_stats(lt),
        throughput=throughput(st, lt, batch),
        stable=is_stable(lt),
        warmup_runs=warm,
        elapsed_s=(clock() - origin) / 1e9,
        contention=loaded.combined(),
    )


def ends_on_its_own(plan: TimingPlan) -> bool:
    """A plan with a finite duration or a run limit ends and sums up every sample; an
    open-ended one runs until its consumer closes it."""
    return plan.duration_s != float("inf") or bool(plan.max_runs)


def _batch(starts: list[int], lats: list[int], origin: int) -> LatencyBatch:
    """The filled lists as one batch; the lists are emptied for the next."""
    ev = LatencyBatch(np.array(starts, dtype=np.int64), np.array(lats, dtype=np.int64), origin)
    starts.clear()
    lats.clear()
    return ev
