"""A live run's raw samples in the Runs dock take about their own 16 B each, however the
engine batches them: kept as a list of each batch's arrays, a busy machine's batches of a
sample or two took 20x that (31 MB at the 50,000-sample cap, which such a machine reaches
only after most of an hour), and the window's memory grew all hour (issue 54's soak)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from engine.api import latency_stats
from widgets.models.runs_summary import MAX_SAMPLES, RunsSummary

MS = 1e6  # ns


def _feed(s: RunsSummary, n: int, per: int, lat_ms: float, t0: int = 0) -> int:
    """`n` samples of `lat_ms`, `per` a batch (the last batch what is left)."""
    for t in range(t0, t0 + n, per):
        k = min(per, t0 + n - t)
        s.add(np.arange(t, t + k) * 2 * MS, np.full(k, lat_ms * MS))
    return t0 + n


def test_a_busy_runs_samples_take_about_their_own_size() -> None:
    s = RunsSummary()
    s.start("FP32 fusion=all batch=1 threads=2", "x 1x3", 1, "m.onnx")
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        _feed(s, 10_000, 1, 1.0)  # a busy machine: a sample a batch
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    own = 10_000 * 16  # a start and a latency, float64
    assert held - base < 2 * own, f"{(held - base) / 1e6:.1f} MB for {own / 1e6:.1f} MB"


@pytest.mark.parametrize("per", [7, 1000, 70_000])
def test_the_figures_are_the_newest_samples_at_most_the_cap(per: int) -> None:
    s = RunsSummary()
    row = s.start("FP32", "x 1x3", 1, "m.onnx")
    old = max(per, 30_000)
    t = _feed(s, old, per, 1.0)  # 1 ms: all but the last dropped by the cap
    t = _feed(s, MAX_SAMPLES - 2, per, 3.0, t)
    _feed(s, 1, 1, 2.0, t)
    r = s.rows()[row]
    expect = np.full(MAX_SAMPLES, 3.0 * MS)
    expect[0], expect[-1] = 1.0 * MS, 2.0 * MS
    want = latency_stats(expect.astype(np.int64))
    assert r.count == old + MAX_SAMPLES - 1
    assert r.p50_ms == pytest.approx(want.p50) and r.p99_ms == pytest.approx(want.p99)
    assert r.p50_ci == pytest.approx(want.p50_ci) and r.p99_ci == pytest.approx(want.p99_ci)


def test_the_engines_figures_replace_the_samples() -> None:
    s = RunsSummary()
    row = s.start("FP32", "x 1x3", 1, "m.onnx")
    _feed(s, 5_000, 5, 1.0)
    s.finish(5_000, 1.5, 2.5, 400.0)
    r = s.rows()[row]
    assert (r.count, r.p50_ms, r.p99_ms, r.samples_per_s) == (5_000, 1.5, 2.5, 400.0)
    assert s._runs[row].samples.nbytes == 0  # not read again: given back
