"""The engine host's live run keeps nothing that grows with its length (issue 54): its
samples wait in a temporary file for the run's summary, which stays exact (every raw
sample), and the machine's load over it is a running total, not a list of windows."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from engine.backends.base import PrepareRequest
from engine.config import RunConfig
from engine.events import ContentionSample, Event, LatencyBatch, Notice, RunEnded, TimingDone
from engine.measure.contention import Contention, combine
from engine.measure.stats import is_stable, latency_stats, throughput
from engine.model.workload import JobInputs, Workload
from engine.run.live import LiveRun, LoadTotal, Staged, span_throughput, stage
from tests.conftest import DEMO_CNN


@pytest.fixture(scope="module")
def staged() -> Iterator[Staged]:
    """The demo CNN built once for these tests (its real ONNX Runtime session)."""
    gen = stage(PrepareRequest(Workload(str(DEMO_CNN), RunConfig(), JobInputs())), "cnn")
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            built: Staged = stop.value
            break
    yield built
    built.prepared.close()


def _live(
    run: LiveRun, staged: Staged, seconds: float, min_samples: int, window: bool
) -> list[Event]:
    """Time `staged` live for `seconds`, at least `min_samples` and (`window`) until the
    machine's load has been read once; every event, the extra ones included (a busy
    machine gets fewer samples a second)."""
    events: list[Event] = list(run.begin(staged))
    end = time.monotonic() + seconds
    got, windows = 0, 0
    while time.monotonic() < end or got < min_samples or (window and not windows):
        ev = run.step()
        assert ev is not None
        events.append(ev)
        events.extend(run.extra_events())
        if isinstance(ev, LatencyBatch):
            got += ev.latencies_ns.size
        windows += isinstance(ev, ContentionSample)
    return events


def test_a_live_run_sums_up_exactly_from_samples_kept_in_its_file(
    staged: Staged, tmp_path: Path
) -> None:
    run = LiveRun(block=16, spill_dir=str(tmp_path))
    events = _live(run, staged, 1.0, min_samples=100, window=True)
    assert run.segment is not None and run.segment.samples.spilled >= 96
    assert run.segment.samples.nbytes == 16 * 8  # one block in memory
    events += list(run.end())
    batches = [e for e in events if isinstance(e, LatencyBatch)]
    starts = np.concatenate([b.starts_ns for b in batches])  # what the window records
    lats = np.concatenate([b.latencies_ns for b in batches])
    done = next(e for e in events if isinstance(e, TimingDone))
    assert done.latency == latency_stats(lats)  # every raw sample, its count shown
    assert done.latency.count == lats.size
    assert done.throughput == throughput(starts, lats, staged.batch)  # no pass paused it
    assert done.stable == is_stable(lats)
    assert done.elapsed_s == (starts[-1] + lats[-1]) / 1e9
    windows = [e.contention for e in events if isinstance(e, ContentionSample)]
    assert windows and _same(done.contention, combine(windows))
    assert isinstance(events[-1], RunEnded) and events[-1].status == "ok"
    assert not [e for e in events if isinstance(e, Notice) and "samples" in e.message]
    assert list(tmp_path.iterdir()) == []


def test_no_usable_temp_dir_is_said_once_and_the_summary_stays_exact(
    staged: Staged, tmp_path: Path
) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    run = LiveRun(block=16, spill_dir=str(not_a_dir))
    events = _live(run, staged, 0.5, min_samples=40, window=False)
    events += list(run.end())
    said = [e for e in events if isinstance(e, Notice) and "live samples" in e.message]
    assert len(said) == 1 and said[0].level == "warning"
    assert str(not_a_dir) in said[0].message and "stay in memory" in said[0].message
    lats = np.concatenate([b.latencies_ns for b in events if isinstance(b, LatencyBatch)])
    done = next(e for e in events if isinstance(e, TimingDone))
    assert done.latency == latency_stats(lats)
    assert events.index(said[0]) < events.index(done)


def test_throughput_from_the_span_is_the_samples_throughput() -> None:
    rng = np.random.default_rng(7)
    for n in (1, 2, 1000):
        lats = rng.integers(10_000, 5_000_000, n)
        starts = np.cumsum(lats + rng.integers(0, 1000, n)) - lats
        first, last = int(starts[0]), int(starts[-1] + lats[-1])
        assert span_throughput(n, first, last, 4) == throughput(starts, lats, 4)
    assert span_throughput(0, 0, 0, 1) == throughput(np.empty(0), np.empty(0), 1)


def _window(r: random.Random) -> Contention:
    def maybe(v: float) -> float | None:
        return v if r.random() < 0.6 else None

    return Contention(
        window_s=0.0 if r.random() < 0.05 else r.uniform(0.9, 1.3),  # combine skips 0 s
        cpus=r.choice([2, 2, 4]),
        others_cpu=r.uniform(0, 2),
        steal=r.uniform(0, 0.1),
        own_cpu=r.uniform(0, 2),
        app_cpu=maybe(r.uniform(0, 1)),
        clock_ratio=maybe(r.uniform(0.5, 1)),
        nice=r.choice([0, 0, 5]),
        gpu_others=maybe(r.uniform(0, 50)),
        gpu_throttle=r.choice([None, None, "power cap", "thermal, power cap"]),
    )


def test_the_running_load_total_is_what_combine_makes_of_every_window() -> None:
    r = random.Random(3)
    for n in (0, 1, 2, 5, 3600):
        windows = [_window(r) for _ in range(n)]
        total = LoadTotal()
        for w in windows:
            total.add(w)
        assert _same(total.combined(), combine(windows)), n


def _same(a: Contention | None, b: Contention | None) -> bool:
    """Equal, the means to float rounding (a running sum and `sum` may round apart)."""
    if a is None or b is None:
        return a is b
    for name in Contention.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, float) and isinstance(y, float):
            if x != pytest.approx(y, rel=1e-12, abs=1e-15):
                return False
        elif x != y:
            return False
    return True
