"""The What-if says what its answer cannot promise (issue 49, item 6): a question past the
simulated capacity, one beyond the calibrated batching, a calibration measured on a busy
machine; and its "max rate under the SLO" is read off the curve it draws."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from engine.measure.contention import Contention
from engine.serve.batching import BatchPolicy
from engine.serve.sim.capacity_search import Scenario, max_rate
from engine.serve.sim.service import ServiceModel
from engine.serve.sim.what_if import Question, answer
from engine.serve.sim.what_if_flags import PAST_CAPACITY, calibration_line, max_rate_text, rate_text
from engine.serve.traffic.schedule import parse_traffic

BUSY = Contention(window_s=40.0, cpus=2, others_cpu=1.4, steal=0.0, own_cpu=1.0)
QUIET = Contention(window_s=40.0, cpus=2, others_cpu=0.02, steal=0.0, own_cpu=1.9)


def service(contention: Contention | None = None, instances: int = 1) -> ServiceModel:
    """Batches of 1 in 0.5 s, of 2 in 1 s: full-batch capacity 2 requests/s."""
    return ServiceModel(
        {1: np.full(9, 0.5), 2: np.full(9, 1.0)}, {"instances": instances}, contention=contention
    )


def bumpy(self: Scenario, rate: float, policy: BatchPolicy, svc: ServiceModel) -> dict[str, Any]:
    """A p99 that is not monotonic in the rate (as a server idling between requests runs
    slower): within 100 ms below 1.1/s and again from 1.3 to 1.9/s."""
    p99 = 50.0 if rate < 1.1 or 1.3 <= rate < 1.9 else 500.0
    return {
        "latency_ms": {"p50": p99 / 2, "p99": p99},
        "throughput": {"requests_per_s": rate},
        "requests": {"rejected": 0, "timed_out": 0, "completed": 100, "cache_hits": 0},
    }


def test_the_max_rate_under_the_slo_agrees_with_the_curve(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bisection of its own over 0-2x capacity found 1.9/s while the curve's 1.2/s point
    sat above the SLO line; read off the curve, every point at or below the max meets the
    SLO, the next one misses, and the max's own point is on the curve."""
    monkeypatch.setattr(Scenario, "run", bumpy)
    q = Question(parse_traffic("poisson:0.5"), BatchPolicy(max_batch=2), None, slo_ms=100.0)
    a = answer(q, service())
    rate, curve = a["max_rate"], a["proposed"]
    assert 0.9 < rate < 1.1
    below = [p for p in curve if p["offered_per_s"] <= rate]
    above = [p for p in curve if p["offered_per_s"] > rate]
    assert below and all(p["p99_ms"] <= 100.0 for p in below)
    assert above[0]["p99_ms"] > 100.0
    assert [p["offered_per_s"] for p in curve if p.get("max_rate")] == [rate]
    # the CLI's --find reads it off its own curve the same way
    work = Scenario(parse_traffic("poisson:0.5"), 100)
    found, _, _ = max_rate(work, BatchPolicy(max_batch=2), service(), 100.0)
    assert found < 1.1


def test_a_question_past_capacity_says_its_percentiles_depend_on_the_duration() -> None:
    svc, policy = service(), BatchPolicy(max_batch=2)
    past = answer(Question(parse_traffic("poisson:3"), policy, None), svc)
    assert past["past_capacity"] is True and past["utilisation"] == pytest.approx(1.5)
    assert PAST_CAPACITY in past["flags"]
    assert "depend on its duration" in PAST_CAPACITY
    under = answer(Question(parse_traffic("poisson:0.5"), policy, None), svc)
    assert under["past_capacity"] is False and under["flags"] == []


def test_a_question_beyond_the_calibrated_batching_is_flagged() -> None:
    a = answer(Question(parse_traffic("poisson:0.5"), BatchPolicy(max_batch=4), None), service())
    assert "batch 4 is beyond the calibrated 1-2: extrapolated" in a["flags"]
    two = answer(
        Question(parse_traffic("poisson:0.5"), BatchPolicy(max_batch=2, instances=2), None),
        service(),
    )
    (flag,) = [f for f in two["flags"] if "instance" in f]
    assert flag.startswith("2 instance(s), calibrated with 1 running at once")
    assert "slower" in flag


def test_a_busy_calibration_says_so_and_survives_its_file() -> None:
    svc = ServiceModel.from_json(service(BUSY).to_json())
    assert svc.contention == BUSY
    assert calibration_line(svc.contention).startswith(
        "calibrated busy: other processes used 1.40 of 2 CPUs"
    )
    a = answer(Question(parse_traffic("poisson:0.5"), BatchPolicy(max_batch=2), None), svc)
    assert any(f.startswith("calibrated busy") for f in a["flags"])
    quiet = answer(
        Question(parse_traffic("poisson:0.5"), BatchPolicy(max_batch=2), None), service(QUIET)
    )
    assert quiet["calibration"].startswith("calibrated quiet") and quiet["flags"] == []
    old = service().to_json()
    del old["contention"]  # a calibration cached before contention was measured
    assert "unknown" in calibration_line(ServiceModel.from_json(old).contention)


def test_rates_keep_the_digits_that_matter() -> None:
    assert rate_text(1.43) == "1.43/s" and rate_text(12.6) == "12.6/s"
    assert rate_text(1250.4) == "1,250/s"
    assert max_rate_text(0.0) == "no rate on the curve meets the SLO"
    assert max_rate_text(1.43) == "max rate under the SLO 1.43/s"
    assert "at least" in max_rate_text(2.6, beyond=True)


def test_without_repeats_a_real_check_names_the_calibrations_own_drift() -> None:
    """One real run: its error stands beside how far the calibration's own batch times
    moved while it was timed (the last third against the first, per size)."""
    from engine.serve.sim.real_check import check
    from engine.serve.sim.what_if_flags import calibration_drift

    steady = np.full(12, 0.01)
    moved = np.r_[np.full(4, 0.01), np.full(4, 0.011), np.full(4, 0.011)]
    svc = ServiceModel({1: steady * 0.5, 2: moved}, {"instances": 1})
    assert calibration_drift(svc) == pytest.approx(0.05)  # sizes 0% and 10%: their median
    assert np.isnan(calibration_drift(ServiceModel({1: np.full(5, 0.01)}, {})))

    def summary(p99: float) -> dict[str, Any]:
        return {"latency_ms": {"p50": p99 / 2, "p99": p99}, "throughput": {"requests_per_s": 5}}

    rc = check("poisson:5", summary(30.0), summary(20.0), 1.0, 5.0, None, [], 0.05)
    assert "calibration's own batch times moved 5% while it was timed" in rc.text()


def test_with_a_cache_the_curve_and_the_max_rate_reach_past_the_models_capacity() -> None:
    """Hits skip the model: the grid the max rate is read off reaches 130% of the capacity
    over the share that reaches the model (as the What-if's does), not 130% of it."""
    from engine.serve.sim.capacity_search import capacity_curve

    work = Scenario(parse_traffic("poisson:1"), 200, cache_size=1000, repeat=0.5)
    curve = capacity_curve(work, BatchPolicy(max_batch=2), service(), points=4)
    assert curve[-1]["offered_per_s"] == pytest.approx(1.3 * 2.0 / 0.5)
