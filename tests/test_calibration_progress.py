"""A calibration says how far it is and how long is left, stops when asked (nothing
half-measured cached), records how busy the machine was, and does not warm every batch
size it will never time (issue 49, item 6: 4-5 minutes with no progress and no Cancel)."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.events import Notice, Progress
from engine.serve.batching import BatchPolicy
from engine.serve.setup import Serving, prepare_serving
from engine.serve.sim.calibration import calibration_context, load_or_calibrate, time_left
from engine.serve.sim.service import ServiceModel, calibrate


class FakePrepared:
    """A model taking stacked batches: each run sleeps a little per sample."""

    batch = 1

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def make_feeds(self, index: int) -> dict[str, np.ndarray]:
        return {"x": np.full((1, 4), float(index), np.float32)}

    def run_batch(self, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        n = int(feeds["x"].shape[0])
        self.sizes.append(n)
        time.sleep(0.0002 * n)
        return [feeds["x"]]


def test_a_calibration_warms_the_largest_size_only_not_every_size_up_to_it() -> None:
    """For a max batch of 32 the serving warm-up ran all of 1..32 once (528 samples: 18 s of
    a MiniLM calibration's 44 s); the calibration warms each size it times by itself."""
    p = FakePrepared()
    prepare_serving(p, BatchPolicy(max_batch=32), "m.onnx", warm_all=False)  # type: ignore[arg-type]
    assert p.sizes == [2, 32]  # the batch-dimension probe, then the largest once
    p.sizes.clear()
    prepare_serving(p, BatchPolicy(max_batch=32), "m.onnx")  # type: ignore[arg-type]
    assert sorted(p.sizes[1:]) == list(range(1, 33))  # a real loop still warms every shape


def test_progress_says_the_time_left_and_a_stop_keeps_nothing() -> None:
    calls = [0]

    def run(n: int) -> None:
        calls[0] += 1
        time.sleep(0.001 * n)

    events = list(calibrate(run, lambda n: n, [1, 2], {}, runs=30, min_s=0.0, warmup=1))
    timing = [e for e in events if isinstance(e, Progress) and e.total is not None]
    assert timing and all(0 <= e.done <= (e.total or 0) for e in timing)
    assert "batch" in timing[0].message and "timed" in timing[0].message
    assert isinstance(events[-1], ServiceModel)

    calls[0] = 0
    stopped = list(
        calibrate(
            run,
            lambda n: n,
            [1, 2],
            {},
            runs=30,
            min_s=0.0,
            warmup=1,
            should_stop=lambda: calls[0] >= 10,
        )
    )
    assert calls[0] == 10 and not any(isinstance(e, ServiceModel) for e in stopped)


def test_time_left_follows_the_pace_so_far() -> None:
    assert time_left(10.0, 5.0, 20.0) == pytest.approx(30.0)  # twice as slow as estimated
    assert time_left(10.0, 5.0, 20.0, after_s=4.0) == pytest.approx(34.0)
    assert time_left(1.0, 0.0, 20.0) is None


def _serving() -> tuple[FakePrepared, Serving]:
    p = FakePrepared()
    return p, prepare_serving(p, BatchPolicy(max_batch=2), "m.onnx", warm_all=False)  # type: ignore[arg-type]


def test_a_calibration_keeps_its_contention_and_says_the_time_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))
    _p, serving = _serving()
    context = calibration_context("sha", {"batch": 1}, "cpu", 2, 1)
    items = list(load_or_calibrate(serving, context, remeasure=True))
    model = items[-1]
    assert isinstance(model, ServiceModel) and model.contention is not None
    assert model.contention.verdict in ("quiet", "busy")  # whichever this machine is now
    said = [e.message for e in items if isinstance(e, Progress)]
    assert any("s left" in m for m in said) and any("real loop" in m for m in said)
    assert said[-1].startswith("calibrated in")
    busy = [e for e in items if isinstance(e, Notice) and "calibrated busy" in e.message]
    assert bool(busy) == model.contention.busy
    (cached,) = (tmp_path / "calibration").glob("*.json")
    again = [x for x in load_or_calibrate(serving, context) if isinstance(x, ServiceModel)]
    kept = again[0].contention  # kept in the file (rounded to its JSON's digits)
    assert kept is not None and kept.to_json() == model.contention.to_json()
    assert cached.is_file()


def test_a_stopped_calibration_caches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))
    p, serving = _serving()
    context = calibration_context("sha", {"batch": 1}, "cpu", 2, 1)
    start = len(p.sizes)
    items = list(load_or_calibrate(serving, context, True, lambda: len(p.sizes) > start + 5))
    assert not any(isinstance(x, ServiceModel) for x in items)
    assert not list(tmp_path.glob("calibration/*.json"))


def test_real_check_holds_the_error_against_the_real_runs_spread() -> None:
    from engine.measure.contention import Contention
    from engine.serve.sim.real_check import check

    def summary(p99: float, busy: float | None = None) -> dict[str, Any]:
        s: dict[str, Any] = {
            "latency_ms": {"p50": p99 / 2, "p99": p99},
            "throughput": {"requests_per_s": 10.0},
        }
        if busy is not None:
            c = Contention(window_s=10.0, cpus=2, others_cpu=busy, steal=0.0, own_cpu=1.0)
            s["machine"] = {"contention": c.to_json()}
        return s

    quiet = Contention(window_s=30.0, cpus=2, others_cpu=0.01, steal=0.0, own_cpu=1.9)
    alone = check("poisson:10", summary(30.0, busy=1.4), summary(20.0), 1.0, 10.0, quiet)
    assert math.isnan(alone.repeat_spread) and not alone.agrees
    text = alone.text()
    assert "run the same load again to see the real runs' own spread" in text
    assert "the real run busy (others used 1.40 of 2 CPUs) · the calibration quiet" in text
    assert alone.cause().startswith("the real run was measured busy")
    # two earlier runs of the row at 24 and 36 ms: the real runs spread 40%, a 1.5x miss
    # is outside it; a 1.2x one is within it, and agrees
    rc = check("poisson:10", summary(30.0), summary(20.0), 1.0, 10.0, quiet,
               [summary(24.0), summary(36.0)])  # fmt: skip
    assert rc.repeats == 3 and rc.repeat_spread == pytest.approx(0.4)
    assert "off by 50%, outside the real runs' own spread of 40% (3 runs" in rc.text()
    close = check("poisson:10", summary(24.0), summary(20.0), 1.0, 10.0, None,
                  [summary(30.0), summary(36.0)])  # fmt: skip
    assert close.p99_ratio == pytest.approx(1.2) and close.agrees
    assert "within the real runs' own spread" in close.text()
