"""Traffic specs, schedules and request keys: seeded, the right rates, bad specs refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.errors import ConfigError, InputError
from engine.serve.batching import BatchPolicy, BatchRule, take
from engine.serve.response_cache import ResponseCache
from engine.serve.traffic.schedule import make_schedule, parse_traffic, repeat_keys


@pytest.mark.parametrize(
    ("text", "mean"),
    [("poisson:200", 200.0), ("constant:50", 50.0), ("bursts:100,1100,10,0.1", 200.0),
     ("ramp:0,400", 200.0)],
)  # fmt: skip
def test_rates_come_out_as_specified(text: str, mean: float) -> None:
    spec = parse_traffic(text)
    assert spec.mean_rate() == pytest.approx(mean)
    sched = make_schedule(spec, 100.0, seed=3)
    assert len(sched) == pytest.approx(mean * 100, rel=0.05)
    assert np.all(np.diff(sched.times) >= 0) and sched.times[-1] < 100.0
    again = make_schedule(spec, 100.0, seed=3)
    assert np.array_equal(sched.times, again.times)  # seeded


def test_bursts_and_ramps_have_their_shape() -> None:
    times = make_schedule(parse_traffic("bursts:100,1100,10,0.1"), 100.0, seed=1).times
    in_burst = (times % 10.0) < 1.0
    assert in_burst.sum() / 10 / 1.0 == pytest.approx(1100, rel=0.05)  # per burst second
    assert (~in_burst).sum() / 10 / 9.0 == pytest.approx(100, rel=0.05)
    ramp = make_schedule(parse_traffic("ramp:0,1000"), 10.0, seed=1).times
    late, early = (ramp > 9).sum(), (ramp < 1).sum()
    assert late == pytest.approx(950, rel=0.1) and early == pytest.approx(50, rel=0.35)


def test_repeats_have_the_asked_share_and_zipf_popularity() -> None:
    keys = repeat_keys(np.random.default_rng(0), 100_000, 0.3)
    distinct = np.unique(keys).size
    assert 1 - distinct / keys.size == pytest.approx(0.3, abs=0.01)
    counts = np.bincount(keys)
    assert counts[0] > counts[10] > counts[1000]  # earlier requests are more popular


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("poisson:-5", "rate must be positive"),
        ("poisson:0", "rate must be positive"),
        ("constant:abc", "are not numbers"),
        ("bursts:100,1000,10", "expected 4 numbers"),
        ("bursts:100,1000,10,1.5", "duty must be between 0 and 1"),
        ("closed:0", "1 to 10000 clients"),
        ("uniform:3", "expected one of"),
        ("poisson", "expected one of"),
    ],
)
def test_bad_specs_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_traffic(text)


def test_a_trace_replays_times_keys_and_sizes(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("timestamp,key,size\n100.0,a,1\n100.5,b,2\n100.5,a,1\n102.0,c,3\n")
    sched = make_schedule(parse_traffic(f"trace:{path}"), 0, seed=0)
    assert sched.times.tolist() == [0.0, 0.5, 0.5, 2.0]
    assert sched.keys.tolist() == [0, 1, 0, 2]
    assert sched.sizes is not None and sched.sizes.tolist() == [1, 2, 1, 3]
    bad = tmp_path / "bad.csv"
    bad.write_text("t\n1.0\n0.5\n")
    with pytest.raises(InputError, match=r"line 3: time 0\.5 goes back in time"):
        make_schedule(parse_traffic(f"trace:{bad}"), 0)
    worse = tmp_path / "worse.csv"
    worse.write_text("1.0\nsoon\n")
    with pytest.raises(InputError, match="line 2: time 'soon' is not a number"):
        make_schedule(parse_traffic(f"trace:{worse}"), 0)
    with pytest.raises(InputError, match="not found"):
        make_schedule(parse_traffic(f"trace:{tmp_path / 'none.csv'}"), 0)


def test_the_batcher_follows_tritons_rules() -> None:
    p = BatchPolicy(max_batch=8, preferred=(4,), delay_ms=2.0)
    assert take(0, 0.0, p) == (0, float("inf"))
    assert take(9, 0.0, p) == (8, 0.0)  # a full batch at once
    assert take(5, 0.0, p) == (4, 0.0)  # the largest preferred size that fits
    n, wait = take(3, 0.0005, p)  # less than a preferred size: wait out the delay
    assert n == 0 and wait == pytest.approx(0.0015)
    assert take(3, 0.002, p) == (3, 0.0)  # the delay expired: everything waiting
    assert take(1, 0.0, BatchPolicy()) == (1, 0.0)  # no delay: at once
    with pytest.raises(ConfigError, match="preferred batch sizes"):
        BatchPolicy(max_batch=4, preferred=(8,))
    with pytest.raises(ConfigError, match="instances"):
        BatchPolicy(instances=0)


def test_the_cache_is_lru() -> None:
    cache = ResponseCache(2)
    cache.store(1)
    cache.store(2)
    assert cache.lookup(1)  # 1 is now the most recent
    cache.store(3)  # evicts 2
    assert not cache.lookup(2) and cache.lookup(1) and cache.lookup(3)
    assert ResponseCache(0).lookup(1) is False


def test_store_all_is_store_in_order() -> None:
    """The simulator stores a completed batch's keys at once; `holds` neither counts nor
    moves a key."""
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, 40, rng.integers(1, 9)).tolist() for _ in range(300)]
    one, many = ResponseCache(16), ResponseCache(16)
    for keys in batches:
        for key in keys:
            one.store(key)
        many.store_all(keys)
        assert list(one._entries) == list(many._entries)
    before = list(many._entries)
    assert many.holds(before[0]) and not many.holds(-1)
    assert list(many._entries) == before and many.lookups == 0


@pytest.mark.parametrize(
    "policy",
    [
        BatchPolicy(),
        BatchPolicy(max_batch=8, delay_ms=1.0),
        BatchPolicy(max_batch=8, preferred=(2, 6), delay_ms=3.0),
        BatchPolicy(max_batch=16, preferred=(4, 16)),
    ],
)
def test_the_batch_rule_tables_are_take(policy: BatchPolicy) -> None:
    """The simulator's inline form of `take` (BatchRule) decides as `take` does."""
    rule = BatchRule(policy)
    sizes = sorted({*policy.preferred, policy.max_batch})
    for queued in range(1, policy.max_batch):
        for waited in (0.0, policy.delay_s / 2, policy.delay_s - 1e-12, policy.delay_s, 1.0):
            k, wait = take(queued, waited, policy)
            if rule.pick[queued]:
                assert (k, wait) == (rule.pick[queued], 0.0)
            elif waited >= rule.ripe:
                assert (k, wait) == (queued, 0.0)
            else:
                assert k == 0 and wait == rule.delay - waited
        assert rule.grow[queued] == next(s for s in sizes if s > queued)
    assert rule.grow[0] == 1
