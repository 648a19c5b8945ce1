"""The live engine: one model, one config at a time, timed continuously in segments.

Each config is one run (a segment): it starts with the run's facts (ModelLoaded,
VariantReady, RunStarted, a Marker) and ends with TimingDone + RunEnded when the config
changes or timing stops. Preparing the next config happens elsewhere (a worker thread in
the host) while this segment keeps running. Either engine: ONNX Runtime, or PyTorch
(`config.engine == "torch"`, imported only then). No threads and no Qt here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.backends.ort.inference_session import inference_fn
from engine.backends.ort.profiler import profile_pass
from engine.config import RunConfig
from engine.events import (
    AccuracyResult,
    Event,
    LatencyBatch,
    Marker,
    ModelLoaded,
    Progress,
    RunEnded,
    RunStarted,
    TimingDone,
    VariantReady,
)
from engine.measure.stats import is_stable, latency_stats, throughput
from engine.run.bench import BenchRequest, Prepared, accuracy_pass, prepare
from engine.run.timing import TimingPlan, time_inferences

LIVE_TIMING = TimingPlan(
    warmup_runs=10, warmup_s=0.3, min_runs=1, duration_s=float("inf"), batch_interval_s=0.1
)


@dataclass
class Staged:
    """A prepared config waiting to replace the running one, with its deferred run facts.

    Engine-neutral: `run_once` is one timed inference, `profile(runs, timed_mean_ms)` a
    profiling pass yielding OpProfile, `prepared` the engine's own object (kept alive)."""

    config: RunConfig
    run_once: Callable[[], object]
    batch: int
    profile: Callable[[int, float | None], Iterator[Event]]
    facts: list[Event]  # ModelLoaded, VariantReady, RunStarted, AccuracyResult (in order)
    label: str
    prepared: object = None

    @property
    def provider_used(self) -> str | None:
        return next((ev.provider_used for ev in self.facts if isinstance(ev, RunStarted)), None)


def stage(
    req: BenchRequest,
    label: str,
    check_accuracy: bool = True,
) -> Generator[Event, None, Staged]:
    """Prepare a config. Progress and notices are yielded now; run facts are kept for the
    moment the segment starts, so a recorder sees them after the previous run ended."""
    facts: list[Event] = []
    if req.config.engine == "torch":
        from engine.backends.pytorch.backend import (
            TorchPrepared,
            prepare_torch,
            torch_accuracy_pass,
        )
        from engine.backends.pytorch.profiler import torch_profile_pass

        tp: TorchPrepared = yield from _keep_facts(prepare_torch(req), facts)
        if check_accuracy and tp.config.precision != "fp32":
            yield from _keep_facts(torch_accuracy_pass(tp, req.inputs_npz is None), facts)

        def torch_profile(runs: int, mean: float | None) -> Iterator[Event]:
            return torch_profile_pass(
                tp.run_once, runs=runs, cuda=tp.device == "cuda", timed_mean_ms=mean
            )

        batch = _batch_of(tp.feeds)
        return Staged(tp.config, tp.run_once, batch, torch_profile, facts, label, tp)
    p: Prepared = yield from _keep_facts(prepare(req), facts)
    if check_accuracy and p.config.precision != "fp32":
        yield from _keep_facts(accuracy_pass(p, req.inputs_npz is None), facts)

    def ort_profile(runs: int, mean: float | None) -> Iterator[Event]:
        return profile_pass(
            p.variant.path, p.config, p.feeds, runs=runs, gpu_present=p.gpu, timed_mean_ms=mean
        )

    return Staged(
        p.config, inference_fn(p.opened, p.feeds), _batch_of(p.feeds), ort_profile, facts, label, p
    )


RUN_FACTS = (ModelLoaded, VariantReady, RunStarted, AccuracyResult)


def _keep_facts(events: Iterator[Event], facts: list[Event]) -> Generator[Event, None, Any]:
    """The events, except run facts, which go to `facts`; returns the generator's value."""
    try:
        while True:
            try:
                ev = next(events)
            except StopIteration as stop:
                return stop.value
            if isinstance(ev, RUN_FACTS):
                facts.append(ev)
            else:
                yield ev
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()


@dataclass
class Segment:
    staged: Staged
    timing: Iterator[Event]
    starts: list[np.ndarray] = field(default_factory=list)
    lats: list[np.ndarray] = field(default_factory=list)
    warmup_runs: int = 0
    origin_ns: int = 0


class LiveSession:
    """Runs the current segment in small steps; swaps segments on demand."""

    def __init__(self) -> None:
        self.segment: Segment | None = None

    @property
    def config(self) -> RunConfig | None:
        return self.segment.staged.config if self.segment else None

    def begin(self, staged: Staged) -> Iterator[Event]:
        """End the running segment (if any) and start `staged`."""
        yield from self.end()
        timing = time_inferences(staged.run_once, LIVE_TIMING, staged.batch)
        self.segment = Segment(staged, timing)
        yield from staged.facts
        yield Marker("config", staged.label, time.perf_counter_ns())

    def step(self) -> Event | None:
        """Advance timing by one batch (about 0.1 s); None when nothing is running."""
        seg = self.segment
        if seg is None:
            return None
        ev = next(seg.timing)
        if isinstance(ev, LatencyBatch):
            seg.starts.append(ev.starts_ns)
            seg.lats.append(ev.latencies_ns)
            seg.origin_ns = ev.origin_ns
        elif isinstance(ev, Progress) and ev.stage == "warmup":
            seg.warmup_runs = int(ev.done)
        return ev

    def end(self, status: str = "ok", error: str | None = None) -> Iterator[Event]:
        """Close the running segment: its statistics from every raw sample, then RunEnded."""
        seg = self.segment
        if seg is None:
            return
        self.segment = None
        close = getattr(seg.timing, "close", None)
        if close is not None:
            close()
        lats = np.concatenate(seg.lats) if seg.lats else np.empty(0, np.int64)
        starts = np.concatenate(seg.starts) if seg.starts else np.empty(0, np.int64)
        elapsed = (starts[-1] + lats[-1]) / 1e9 if lats.size else 0.0
        batch = seg.staged.batch
        yield TimingDone(
            latency_stats(lats),
            throughput(starts, lats, batch),
            is_stable(lats),
            seg.warmup_runs,
            float(elapsed),
        )
        yield RunEnded(status, error)

    def profile(self, runs: int = 20) -> Iterator[Event]:
        """A profiling pass of the running config (a separate session; timing pauses)."""
        seg = self.segment
        if seg is None:
            return
        lats = seg.lats[-50:]
        mean = float(np.concatenate(lats).mean() / 1e6) if lats else None
        yield Marker("profile", "profiling", time.perf_counter_ns())
        yield from seg.staged.profile(runs, mean)


def _batch_of(feeds: dict[str, np.ndarray]) -> int:
    for arr in feeds.values():
        return int(arr.shape[0]) if arr.ndim else 1
    return 1
