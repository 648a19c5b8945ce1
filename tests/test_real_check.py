"""A real load run held against the What-if's prediction: agreement, and each likely cause
named when they differ (the afternoon's p99 15,379 ms real against 222 ms predicted)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from engine.serve.sim.real_check import check
from engine.serve.sim.service import ServiceModel


def _summary(
    p50: float, p99: float, rate: float, queue: int = 0, hits: float = 0.0
) -> dict[str, Any]:
    return {
        "latency_ms": {"p50": p50, "p99": p99},
        "throughput": {"requests_per_s": rate},
        "queue_depth": {"max": queue},
        "cache": {"hit_rate": hits},
    }


def test_close_figures_agree_and_name_no_cause() -> None:
    rc = check("poisson:50", _summary(10, 20, 50), _summary(10.5, 21, 50), 1.02, 50)
    assert rc.agrees and rc.cause() == ""
    assert "agree" in rc.text() and "REAL run at poisson:50" in rc.text()


def test_the_afternoons_overloaded_run_names_speed_and_overload() -> None:
    """Bursts 20->120/s, max batch 1, 2 instances: predicted p99 222 ms, real 15,379 ms at
    27 requests/s with 458 queued; its batches ran 1.8x the calibration's time."""
    real = _summary(8516, 15379, 27, queue=458)
    rc = check("bursts:20,120,5,0.3", real, _summary(40, 222, 46), 1.8, 46.7)
    assert not rc.agrees
    assert rc.p99_ratio == 15379 / 222
    text = rc.text()
    assert "real p99 69x the prediction" in text
    assert "ran 1.8x slower than the calibration" in text
    assert "served 27 of 47 requests/s offered (queue up to 458)" in text


def test_faster_batches_and_cache_share_are_causes() -> None:
    rc = check("poisson:10", _summary(5, 9, 10, hits=0.6), _summary(10, 20, 10, hits=0.2), 0.5, 10)
    cause = rc.cause()
    assert "ran 2.0x faster" in cause and "60% of requests for real against 20%" in cause


def test_unexplained_difference_says_so_and_missing_figures_do_not_crash() -> None:
    rc = check("poisson:10", _summary(5, 40, 10), _summary(5, 20, 10), 1.0, 10)
    assert "not the batches' speed nor overload" in rc.cause()
    empty = check("poisson:10", {}, {"latency_ms": {"p99": "x"}}, math.nan, 10)
    assert math.isnan(empty.p99_ratio) and not empty.agrees
    assert "?x" in empty.text()


def test_speed_ratio_is_the_real_batches_against_the_calibrations_medians() -> None:
    service = ServiceModel({1: np.full(9, 0.010), 4: np.full(9, 0.020)}, {})
    sizes = np.array([1, 1, 4])
    assert service.speed_ratio(sizes, np.array([0.02, 0.02, 0.04])) == 2.0


def test_the_predictions_own_flags_come_first_among_the_causes() -> None:
    """Two instances on a one-instance calibration predicted p50 467 ms against a real
    5,174 ms: the prediction was extrapolated, and the check says so first."""
    two = "2 instance(s), calibrated with 1 running at once: batches may run slower"
    busy = "calibrated busy: other processes used 1.40 of 2 CPUs - predictions may be off"
    rc = check("poisson:5", _summary(5174, 9000, 5), _summary(467, 900, 5), 1.0, 5,
               flags=[two, busy])  # fmt: skip
    assert rc.cause().startswith(f"the prediction was flagged: {two}")
    assert "calibrated busy" not in rc.cause()  # the machines are compared on their own line
    assert "not the batches' speed" not in rc.cause()
