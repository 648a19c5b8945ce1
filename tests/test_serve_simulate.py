"""The simulator against closed-form queueing results, its two event loops against each
other, its records against stored ones, and nothing lost."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.errors import OpScopeError
from engine.serve.batching import BatchPolicy
from engine.serve.records import OK, REJECTED, TIMED_OUT, summarize
from engine.serve.sim.service import ServiceModel
from engine.serve.sim.simulate import simulate
from engine.serve.traffic.schedule import Schedule, make_schedule, parse_traffic
from tests import sim_cases

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def service(samples_ms: np.ndarray, size: int = 1) -> ServiceModel:
    return ServiceModel({size: samples_ms / 1e3}, {})


def poisson(rate: float, n: int, seed: int = 1, repeat: float = 0.0) -> Schedule:
    return make_schedule(parse_traffic(f"poisson:{rate}"), 0, seed, repeat, requests=n)


def test_mm1_waits_match_the_formula() -> None:
    """M/M/1, mean service 1 ms at 70% load: mean time in system 1/(mu - lambda)."""
    rng = np.random.default_rng(0)
    svc = service(rng.exponential(1.0, 100_000))
    mean_s = float(svc.samples[1].mean())
    lam = 0.7 / mean_s
    s = summarize(simulate(poisson(lam, 200_000), BatchPolicy(), svc))
    expected_ms = 1e3 / (1 / mean_s - lam)
    assert s["latency_ms"]["mean"] == pytest.approx(expected_ms, rel=0.05)
    # the sojourn time of M/M/1 is exponential: p99 = ln(100) x mean
    assert s["latency_ms"]["p99"] == pytest.approx(np.log(100) * expected_ms, rel=0.08)


def test_md1_waits_match_pollaczek_khinchine() -> None:
    """M/D/1 at 80% load: mean wait in queue rho / (2 mu (1 - rho))."""
    svc = service(np.full(10, 2.0))  # 2 ms, deterministic
    rho = 0.8
    lam = rho / 2e-3
    s = summarize(simulate(poisson(lam, 200_000, seed=4), BatchPolicy(), svc))
    wait_ms = 1e3 * rho / (2 * (1 / 2e-3) * (1 - rho))
    assert s["latency_ms"]["mean"] == pytest.approx(2.0 + wait_ms, rel=0.05)


@pytest.mark.parametrize("late", ["", "by_state", "parked"])
def test_both_event_loops_agree(late: str) -> None:
    """The fast loop (no cache, no queue limit) and the general one on the same input; with
    the calibrated lateness too (the batcher woken late, or by the first arrival after its
    delay expired, sends drawn by the server's state, instances' turnarounds, batch times
    by the batch before), and as calibration version 16 keeps it (sends parked by the
    generator's last look, one pool of wake-ups)."""
    rng = np.random.default_rng(2)
    svc = ServiceModel(
        {1: rng.gamma(4, 0.25e-3, 500), 4: rng.gamma(4, 0.5e-3, 500), 8: rng.gamma(4, 0.8e-3, 500)},
        {},
    )
    if late:
        base = sim_cases.parked_service() if late == "parked" else sim_cases.late_service()
        svc = ServiceModel(svc.samples, {}, base.idle_slowdown, base.send_late,
                           wake_late={k: v * 20 for k, v in base.wake_late.items()},
                           turnaround=base.turnaround,
                           after_larger={n: v * 1.1 for n, v in svc.samples.items() if n < 8},
                           after_same=svc.samples)  # fmt: skip
    sched = make_schedule(parse_traffic("bursts:500,4000,2,0.2"), 20.0, seed=5)
    for policy in (
        BatchPolicy(max_batch=8, delay_ms=1.0, instances=2),
        BatchPolicy(max_batch=8, preferred=(4,), delay_ms=3.0, timeout_ms=20.0),
    ):
        fast = simulate(sched, policy, svc, seed=7)
        general = simulate(sched, policy, svc, seed=7, cache_size=0, closed_clients=0)
        unlimited = BatchPolicy(**{**policy.to_json(), "preferred": policy.preferred,
                                   "queue_limit": 10**9})  # fmt: skip
        general = simulate(sched, unlimited, svc, seed=7)
        np.testing.assert_allclose(fast.done, general.done, equal_nan=True)
        assert np.array_equal(fast.outcome, general.outcome)
        assert np.array_equal(fast.batch_size, general.batch_size)


def test_nothing_is_lost_and_limits_hold() -> None:
    svc = service(np.full(10, 5.0))  # 200/s capacity at batch 1
    sched = poisson(400, 4000)  # twice the capacity
    rec = simulate(sched, BatchPolicy(queue_limit=10, timeout_ms=30.0), svc)
    outcomes = np.bincount(rec.outcome, minlength=3)
    assert outcomes.sum() == len(sched)
    assert outcomes[REJECTED] > 0 and outcomes[TIMED_OUT] >= 0 and outcomes[OK] > 0
    ok = rec.outcome == OK
    assert np.all(rec.done[ok] - rec.scheduled[ok] <= 30e-3 + 5e-3 + 1e-9)
    s = summarize(rec)
    assert s["queue_depth"]["max"] <= 10
    req = s["requests"]
    assert req["completed"] + req["rejected"] + req["timed_out"] == req["sent"] == 4000


def test_the_cache_absorbs_repeats() -> None:
    svc = service(np.full(10, 1.0))
    sched = poisson(500, 20_000, repeat=0.5)
    rec = simulate(sched, BatchPolicy(), svc, cache_size=100_000)
    hits = int(rec.hit.sum())
    assert 0.45 * len(sched) < hits < 0.5 * len(sched)  # repeats of in-flight ones miss
    assert np.all(rec.done[rec.hit] == rec.scheduled[rec.hit])


def test_batching_raises_capacity() -> None:
    """At 1.5x the batch-1 capacity, batch 1 backs up; max batch 8 keeps up."""
    svc = ServiceModel({1: np.full(5, 2e-3), 8: np.full(5, 4e-3)}, {})
    sched = poisson(750, 20_000)
    one = summarize(simulate(sched, BatchPolicy(max_batch=1), svc))
    eight = summarize(simulate(sched, BatchPolicy(max_batch=8, delay_ms=1.0), svc))
    assert one["latency_ms"]["p99"] > 100 * eight["latency_ms"]["p99"]
    assert 1.0 < eight["batch_size"]["mean"] < 8.0


def test_closed_loop_keeps_n_in_flight() -> None:
    svc = ServiceModel({1: np.full(10, 2e-3), 4: np.full(10, 2e-3)}, {})  # 2 ms, any size
    sched = make_schedule(parse_traffic("constant:1"), 0, requests=3000)
    rec = simulate(sched, BatchPolicy(max_batch=4), svc, closed_clients=4, closed_requests=3000)
    s = summarize(rec)
    assert s["requests"]["completed"] == 3000
    assert s["batch_size"]["mean"] == pytest.approx(4.0, rel=0.01)  # 4 clients, one batch
    assert s["throughput"]["requests_per_s"] == pytest.approx(4 / 2e-3, rel=0.02)


@pytest.mark.parametrize("name", sorted(sim_cases.cases()))
def test_records_match_the_stored_ones(name: str) -> None:
    """Bit-identical records on seeded cases stored before the simulator was sped up
    (tests/fixtures/make_sim_records.py): a faster simulator is the same simulator."""
    sched, policy, svc, kwargs = sim_cases.cases()[name]
    rec = simulate(sched, policy, svc, **kwargs)
    with np.load(FIXTURES / "sim_records.npz") as stored:
        for field in sim_cases.FIELDS:
            got, want = getattr(rec, field), stored[f"{name}.{field}"]
            assert got.dtype == want.dtype, field
            assert np.array_equal(got, want, equal_nan=want.dtype.kind == "f"), field


def test_a_damaged_calibration_file_is_measured_again_never_fatal(tmp_path: Path) -> None:
    from engine.serve.sim.calibration_file import read_calibration, write_calibration

    path = tmp_path / "calibration" / "x.json"
    assert read_calibration(path, ServiceModel.from_json, "calibration") == (None, None)
    model = ServiceModel({1: np.array([0.001, 0.002])}, {"k": 1})
    write_calibration(path, model.to_json())
    back, notice = read_calibration(path, ServiceModel.from_json, "calibration")
    assert back is not None and back.median(1) == model.median(1)
    assert notice is not None and notice.level == "info" and "from the cache" in notice.message
    path.write_text('{"samples_ms": {"1": [-1]}}')  # parses, but a negative time
    back, notice = read_calibration(path, ServiceModel.from_json, "calibration")
    assert back is None and notice is not None and notice.level == "warning"
    assert "measuring again" in notice.message
    path.write_bytes(b"\x00\xff not json")
    assert read_calibration(path, ServiceModel.from_json, "calibration")[0] is None


def test_idle_slowdowns_come_from_the_loops_own_batches() -> None:
    """Batches grouped by size and by the idle gap before them (across instances), as
    ratios to the size's back-to-back median; thin cells and the first SKIP_S left out."""
    from engine.serve.records import ServeRecords
    from engine.serve.sim.idle_cost import MIN_BATCHES, SKIP_S, idle_ratios

    model = ServiceModel({1: np.full(5, 1e-3), 2: np.full(5, 2e-3)}, {})
    starts, ends, sizes = [], [], []
    t = SKIP_S
    for _ in range(3 * MIN_BATCHES):  # size 1 after a 3 ms gap, 1.5x its median
        t += 3e-3
        starts.append(t)
        t += 1.5e-3
        ends.append(t)
        sizes.append(1)
    for _ in range(MIN_BATCHES):  # size 2 back to back (gap 0)
        starts.append(t)
        t += 2e-3
        ends.append(t)
        sizes.append(2)
    starts.append(0.0)  # before SKIP_S: left out
    ends.append(0.05)
    sizes.append(2)
    rec = ServeRecords.empty(0)
    rec.batch_start, rec.batch_end = np.array(starts), np.array(ends)
    rec.batch_size = np.array(sizes, np.int64)
    out = idle_ratios(rec, model)
    assert set(out) == {1}  # size 2 ran back to back: no idle gap, no ratio
    assert set(out[1]) == {0.002} and np.allclose(out[1][0.002], 1.5)  # bucket [2, 5) ms
    # with another instance's batch still running, a start is not after an idle gap
    rec.batch_start = np.r_[rec.batch_start, SKIP_S]
    rec.batch_end = np.r_[rec.batch_end, t + 1]
    rec.batch_size = np.r_[rec.batch_size, 8]
    assert 1 not in idle_ratios(rec, model)


@pytest.mark.parametrize("cache", [0, 10])
def test_a_trickle_hours_in_ends(cache: int) -> None:
    """Arrivals a day in, a queue delay of 1 ms: the rest of a delay below the clock's
    resolution there is no wait (it looped forever, and --find max-rate with it, when a
    search tried a trickle)."""
    # 9 hours in, a wait of 1 ms comes out 3.4e-12 s short, under half the clock's step
    times = 32_789.46444957898 + np.arange(50) * 7.0
    sched = Schedule(times, np.arange(50, dtype=np.int64))
    svc = ServiceModel({1: np.full(5, 2e-3), 4: np.full(5, 3e-3)}, {})
    policy = BatchPolicy(max_batch=4, delay_ms=1.0)
    rec = simulate(sched, policy, svc, cache_size=cache)
    assert summarize(rec)["requests"]["completed"] == 50


def test_a_calibration_says_when_the_engines_speed_moved_while_it_was_timed() -> None:
    """Its first and last thirds compared (every size's batches over their medians, in the
    order they ran); a move beyond 10% is a warning (a 2-vCPU VM's two-thread transformer
    switched between speeds 20% apart mid-calibration)."""
    import re
    import time

    from engine.events import Notice
    from engine.serve.sim.service import ServiceModel, calibrate

    def events(slow_after: int | None) -> tuple[list[object], list[int]]:
        calls, seen = [0], []

        def run(n: int) -> None:
            calls[0] += 1
            seen.append(n)
            slow = slow_after is not None and calls[0] > slow_after
            time.sleep(0.001 * n * (1.3 if slow else 1.0))

        out = list(calibrate(run, lambda n: n, [1, 2], {}, runs=12, min_s=0.0, warmup=1))
        return out, seen

    steady, seen = events(None)
    model = steady[-1]
    assert isinstance(model, ServiceModel) and model.samples[1].size == 12
    assert not [e for e in steady if isinstance(e, Notice)]
    timed = seen[2:]  # after one warm-up of each size: the sizes shuffled together
    assert sorted(timed) == [1] * 12 + [2] * 12 and timed != sorted(timed)
    assert model.median(2) > 1.5 * model.median(1)
    moved, _ = events(slow_after=2 + 12)  # half of the 24 timed, then 30% slower
    (notice,) = [e for e in moved if isinstance(e, Notice)]
    assert notice.level == "warning", notice
    assert re.search(r"speed moved \+[1-4]\d% while it was timed", notice.message)
    assert isinstance(moved[-1], ServiceModel)


def test_calibration_counts_keep_the_least_runs_and_seconds() -> None:
    from engine.serve.sim.service import FEW_RUNS, MAX_SIZE_S, calibration_counts

    counts = calibration_counts({1: 0.001, 8: 0.01, 4096: 2.0}, 40, 0.25, 800)
    assert counts[1] == 250 and counts[8] == 40  # 0.25 s of the quick size, 40 of the other
    assert counts[4096] == max(FEW_RUNS, int(MAX_SIZE_S / 2.0))  # a slow size: a few runs
    assert calibration_counts({1: 1e-6}, 40, 0.25, 800)[1] == 800  # at most `most`


def test_the_calibration_times_each_size_after_larger_batches_and_after_its_own() -> None:
    """Sizes in short runs shuffled together: each size both right after a larger batch and
    after its own; an engine whose small batches run slower after a larger one (as the
    demo CNN's batches of 1 did, 5-7%) shows it in the split."""
    import itertools
    import time

    from engine.serve.sim.service import calibrate, calibration_order

    order = calibration_order({1: 60, 2: 60, 4: 60}, np.random.default_rng(0))
    assert sorted(order.tolist()) == [1] * 60 + [2] * 60 + [4] * 60
    pairs = list(itertools.pairwise(order.tolist()))
    for n, least in ((1, 15), (2, 5)):  # 1 follows two larger sizes' runs, 2 one
        after_larger = sum(1 for a, b in pairs if b == n and a > n)
        after_own = sum(1 for a, b in pairs if b == n and a == n)
        assert after_larger >= least and after_own >= 15, (n, after_larger, after_own)

    last = [0]

    def run(n: int) -> None:
        time.sleep(0.001 * n * (1.5 if last[0] > n else 1.0))
        last[0] = n

    model = list(calibrate(run, lambda n: n, [1, 2, 4], {}, runs=30, min_s=0.0, warmup=1))[-1]
    assert isinstance(model, ServiceModel)
    for n in (1, 2):
        ratio = np.median(model.after_larger[n]) / np.median(model.after_same[n])
        assert ratio > 1.3, (n, ratio)
    assert 4 not in model.after_larger  # nothing is larger than the largest
    back = ServiceModel.from_json(model.to_json())
    assert np.allclose(back.after_larger[1], model.after_larger[1], rtol=1e-5)
    assert np.allclose(back.after_same[2], model.after_same[2], rtol=1e-5)
    data = model.to_json()
    slow = {**data, "after_same_ms": {"1": [20_000.0]}}  # a 20-s batch: slow, not malformed
    assert ServiceModel.from_json(slow).after_same[1][0] == pytest.approx(20.0)
    for bad in ({"1": [-1.0]}, {"0": [1.0]}, {"1": ["x"]}, {"1": []}, [1.0], {"9": [1.0]}):
        with pytest.raises(OpScopeError, match="calibration data is malformed"):
            ServiceModel.from_json({**data, "after_larger_ms": bad})
