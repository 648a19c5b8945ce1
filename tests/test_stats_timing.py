"""Statistics from raw samples, and the timing loop driven by a fake clock."""

import itertools

import numpy as np
import pytest

from engine.events import LatencyBatch, Progress, TimingDone
from engine.measure.stats import is_stable, latency_stats, rolling_percentiles, throughput
from engine.run.timing import TimingPlan, TimingSamples, time_inferences


def test_percentiles_come_from_raw_samples() -> None:
    ns = np.arange(1, 101, dtype=np.int64) * 1_000_000  # 1..100 ms
    s = latency_stats(ns)
    assert s.count == 100
    assert s.min == 1.0 and s.max == 100.0
    assert s.p50 == pytest.approx(50.5)
    assert s.p99 == pytest.approx(99.01)
    assert s.mean == pytest.approx(50.5)


def test_empty_samples_give_nan_not_crash() -> None:
    s = latency_stats(np.empty(0, np.int64))
    assert s.count == 0 and np.isnan(s.p50)


def test_throughput_uses_wall_time_and_batch() -> None:
    starts = np.array([0, 10, 20, 30], dtype=np.int64) * 1_000_000
    lats = np.full(4, 10_000_000, dtype=np.int64)
    t = throughput(starts, lats, batch=8)
    assert t.inferences_per_s == pytest.approx(100.0)
    assert t.samples_per_s == pytest.approx(800.0)


def test_stability_flags_a_drifting_run() -> None:
    flat = np.full(300, 1_000_000, dtype=np.int64)
    drift = np.concatenate([flat[:100], flat[:100] * 2, flat[:100] * 3])
    assert is_stable(flat)
    assert not is_stable(drift)
    assert not is_stable(flat[:5])  # too few samples to say


def test_rolling_percentiles_shape_and_values() -> None:
    ns = np.arange(1, 11, dtype=np.int64) * 1_000_000
    r = rolling_percentiles(ns, window=5)
    assert r.shape == (10, 3)
    assert r[-1, 0] == pytest.approx(8.0)  # median of 6..10 ms


class FakeClock:
    """Each inference takes `step` ns; reading the clock costs nothing."""

    def __init__(self, step: int) -> None:
        self.now = 0
        self.step = step

    def __call__(self) -> int:
        return self.now

    def run(self) -> None:
        self.now += self.step


def test_timing_discards_warmup_and_meets_count_and_duration() -> None:
    clock = FakeClock(step=2_000_000)  # 2 ms per inference
    plan = TimingPlan(
        warmup_runs=5, warmup_s=0.05, min_runs=10, duration_s=1.0, batch_interval_s=0.1
    )
    samples = TimingSamples(np.empty(0), np.empty(0))
    events = list(time_inferences(clock.run, plan, batch=4, clock=clock, samples=samples))
    done = events[-1]
    assert isinstance(done, TimingDone)
    assert done.warmup_runs == 25  # 0.05 s of 2 ms runs beats the 5-run minimum
    batches = [e for e in events if isinstance(e, LatencyBatch)]
    n = sum(b.latencies_ns.size for b in batches)
    assert n == done.latency.count == samples.latencies_ns.size
    assert n >= 500  # 1 s of 2 ms inferences
    assert done.latency.p50 == pytest.approx(2.0)
    assert done.throughput.samples_per_s == pytest.approx(2000.0)
    assert any(isinstance(e, Progress) and e.stage == "warmup" for e in events)
    starts = np.concatenate([b.starts_ns for b in batches])
    assert np.all(np.diff(starts) == 2_000_000)  # contiguous, none lost between batches


def test_timing_min_runs_extends_a_short_duration() -> None:
    clock = FakeClock(step=500_000_000)  # 0.5 s per inference
    plan = TimingPlan(warmup_runs=1, warmup_s=0, min_runs=6, duration_s=0.1, batch_interval_s=0.1)
    done = list(time_inferences(clock.run, plan, batch=1, clock=clock))[-1]
    assert isinstance(done, TimingDone)
    assert done.latency.count == 6


def test_closing_the_generator_stops_timing() -> None:
    clock = FakeClock(step=1_000_000)
    plan = TimingPlan(warmup_runs=1, warmup_s=0, duration_s=float("inf"))
    gen = time_inferences(clock.run, plan, batch=1, clock=clock)
    batches = list(itertools.islice((e for e in gen if isinstance(e, LatencyBatch)), 3))
    gen.close()
    assert len(batches) == 3


def test_open_ended_timing_keeps_no_samples_it_has_yielded() -> None:
    """The live engine's plan never ends: the loop must not hold what it already sent
    (it held every sample as Python ints, ~76 bytes each, for hours)."""
    import tracemalloc

    clock = FakeClock(step=100_000)  # 0.1 ms: ~1000 samples a batch
    plan = TimingPlan(warmup_runs=1, warmup_s=0, duration_s=float("inf"))
    gen = time_inferences(clock.run, plan, batch=1, clock=clock)
    batches = (e for e in gen if isinstance(e, LatencyBatch))
    sizes = [b.latencies_ns.size for b in itertools.islice(batches, 5)]  # warmed up
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        n = sum(b.latencies_ns.size for b in itertools.islice(batches, 40))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        gen.close()
    assert min(sizes) > 500 and n > 20_000
    assert held < 2 * max(sizes) * 40  # about one batch's lists, not 16+ bytes x n


def test_a_plan_that_ends_still_sums_up_every_sample() -> None:
    clock = FakeClock(step=1_000_000)
    plan = TimingPlan(warmup_runs=1, warmup_s=0, min_runs=1, duration_s=float("inf"), max_runs=700)
    events = list(time_inferences(clock.run, plan, batch=1, clock=clock))
    done = events[-1]
    assert isinstance(done, TimingDone)
    n = sum(e.latencies_ns.size for e in events if isinstance(e, LatencyBatch))
    assert done.latency.count == n >= 700
