"""The live engine: one model, one config at a time, timed continuously in segments.

Each config is one run (a segment): it starts with the run's facts (ModelLoaded,
VariantReady, RunStarted, a Marker) and ends with TimingDone + RunEnded when the config
changes or timing stops. Preparing the next config happens elsewhere (a worker thread in
the host) while this segment keeps running. Any backend: the config names it, and
`engine.backends` prepares it. No threads and no Qt here.
"""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from engine import backends
from engine.backends.base import Prepared, PrepareRequest
from engine.config import RunConfig, oversubscribed
from engine.events import (
    AccuracyResult,
    ContentionSample,
    Event,
    GenerationStarted,
    LatencyBatch,
    Marker,
    ModelLoaded,
    Notice,
    Progress,
    RunEnded,
    RunStarted,
    TimingDone,
    VariantReady,
)
from engine.machine.gpu_contention import window_for
from engine.measure.contention import LoadTotal
from engine.measure.stats import Throughput, is_stable, latency_stats
from engine.model.inputs import empty_inputs
from engine.run.load_window import with_load
from engine.run.memory_trim import big_blocks_mmapped
from engine.run.sample_log import BLOCK, MAX_SAMPLES, SampleLog
from engine.run.timing import TimingPlan, time_inferences

LIVE_TIMING = TimingPlan(
    warmup_runs=10, warmup_s=0.3, min_runs=1, duration_s=float("inf"), batch_interval_s=0.1
)


@dataclass
class Staged:
    """A prepared config waiting to replace the running one, with its deferred run facts
    (ModelLoaded, VariantReady, RunStarted, AccuracyResult, in order)."""

    prepared: Prepared
    facts: list[Event]
    label: str

    @property
    def config(self) -> RunConfig:
        return self.prepared.config

    @property
    def batch(self) -> int:
        return self.prepared.batch

    @property
    def provider_used(self) -> str:
        return self.prepared.provider_used


def stage(
    req: PrepareRequest,
    label: str,
    check_accuracy: bool = True,
) -> Generator[Event, None, Staged]:
    """Prepare a config. Progress and notices are yielded now; run facts are kept for the
    moment the segment starts, so a recorder sees them after the previous run ended."""
    facts: list[Event] = []
    backend = backends.backend_for(req.workload.config)
    crowded = oversubscribed(req.workload.config.threads)
    if crowded:
        yield Notice("warning", crowded)
    prepared: Prepared = yield from _keep_facts(backend.prepare(req), facts)
    empty = empty_inputs(prepared.feeds)
    if empty:
        yield Notice("warning", empty)
    if check_accuracy and prepared.config.precision != "fp32":
        yield from _keep_facts(prepared.accuracy(req.workload.inputs.inputs_npz is None), facts)
    return Staged(prepared, facts, label)


RUN_FACTS = (ModelLoaded, VariantReady, RunStarted, AccuracyResult, GenerationStarted)


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
    samples: SampleLog = field(default_factory=SampleLog)
    warmup_runs: int = 0
    origin_ns: int = 0
    load: LoadTotal = field(default_factory=LoadTotal)  # the machine's, over its windows
    paused_ns: int = 0  # time between its samples spent on profiling passes (not timing)
    pausing: bool = False  # a pass paused it: the gap before its next sample is a pause
    last_end_ns: int = 0  # the end of its last sample (from the timing's origin)
    told: bool = False  # its sample log's problem was said


class LiveRun:
    """Runs the current segment in small steps; swaps segments on demand. A segment keeps
    at most `max_samples` samples (`full`), after which the host continues it as a new run.
    Its samples beyond the block being filled wait in a temporary file (in `spill_dir`;
    None: the system's) until the run's summary (engine/run/sample_log.py)."""

    def __init__(
        self, max_samples: int = MAX_SAMPLES, block: int = BLOCK, spill_dir: str | None = None
    ) -> None:
        self.segment: Segment | None = None
        self.max_samples = max_samples
        self._block, self._spill_dir = block, spill_dir

    @property
    def full(self) -> bool:
        """The running segment holds its cap of samples: time to continue in a new run."""
        return self.segment is not None and self.segment.samples.full

    @property
    def config(self) -> RunConfig | None:
        return self.segment.staged.config if self.segment else None

    def begin(self, staged: Staged) -> Iterator[Event]:
        """End the running segment (if any) and start `staged`."""
        yield from self.end()
        load = window_for(staged.prepared.provider_used)  # with the GPU's, on a GPU
        timing = time_inferences(staged.prepared.run_once, LIVE_TIMING, staged.batch, window=load)
        log = SampleLog(self.max_samples, self._block, self._spill_dir)
        self.segment = Segment(staged, timing, log)
        yield from staged.facts
        yield Marker("config", staged.label, time.perf_counter_ns())

    def step(self) -> Event | None:
        """Advance timing by one batch (about 0.1 s); None when nothing is running."""
        seg = self.segment
        if seg is None:
            return None
        ev = next(seg.timing)
        if isinstance(ev, LatencyBatch):
            if ev.latencies_ns.size:
                if seg.pausing and len(seg.samples):
                    seg.paused_ns += max(0, int(ev.starts_ns[0]) - seg.last_end_ns)
                seg.pausing = False
                seg.last_end_ns = int(ev.starts_ns[-1] + ev.latencies_ns[-1])
            seg.samples.append(ev.starts_ns, ev.latencies_ns)
            seg.origin_ns = ev.origin_ns
        elif isinstance(ev, Progress) and ev.stage == "warmup":
            seg.warmup_runs = int(ev.done)
        elif isinstance(ev, ContentionSample):
            seg.load.add(ev.contention)
        return ev

    def extra_events(self) -> list[Event]:
        """What the running backend made while timing, besides samples (a generating
        model's passes: GenerationSteps), once the timing's origin is known; and, once, why
        the run's samples stay in memory when no temporary file could take them."""
        seg = self.segment
        told = self._tell(seg) if seg is not None else []
        drain = getattr(seg.staged.prepared, "drain_events", None) if seg else None
        if seg is None or drain is None or not seg.origin_ns:
            return told
        events: list[Event] = drain(seg.origin_ns)
        return told + events

    @staticmethod
    def _tell(seg: Segment) -> list[Event]:
        """Its sample log's problem (no temporary file: samples in memory), said once."""
        if seg.told or seg.samples.problem is None:
            return []
        seg.told = True
        return [Notice("warning", seg.samples.problem)]

    def end(self, status: str = "ok", error: str | None = None) -> Iterator[Event]:
        """Close the running segment: its statistics from every raw sample, then RunEnded."""
        seg = self.segment
        if seg is None:
            return
        self.segment = None
        close = getattr(seg.timing, "close", None)
        if close is not None:
            close()
        log = seg.samples
        said = log.problem
        lats = log.latencies()  # from its temporary file, read back once
        log.close()
        if log.problem is not None and (log.problem != said or not seg.told):
            yield Notice("warning", log.problem)  # not said yet, or the file was unreadable
        elapsed = log.last_end_ns / 1e9 if len(log) else 0.0
        yield TimingDone(
            latency_stats(lats),
            _active_throughput(log, seg.staged.batch, seg.paused_ns),
            is_stable(lats),
            seg.warmup_runs,
            float(elapsed),
            seg.load.combined(),
        )
        yield RunEnded(status, error)

    def profile(self, runs: int = 20) -> Iterator[Event]:
        """A profiling pass of the running config (a separate session; timing pauses)."""
        seg = self.segment
        if seg is None:
            return
        mean = seg.samples.recent_mean_ms()
        seg.pausing = True  # its timing waits: the pass's time is no timing's
        with big_blocks_mmapped():  # its big blocks never grow the heap
            yield Marker("profile", "profiling", time.perf_counter_ns())
            yield from with_load(seg.staged.prepared.profile(runs, mean))


def span_throughput(n: int, first_start_ns: int, last_end_ns: int, batch: int) -> Throughput:
    """`engine.measure.stats.throughput` from what it reads of the samples: their count,
    the first start and the last end (a live run keeps no starts)."""
    if not n:
        return Throughput(0.0, 0.0)
    wall_ns = float(last_end_ns - first_start_ns)
    per_s = n / (wall_ns / 1e9) if wall_ns > 0 else 0.0
    return Throughput(per_s, per_s * batch)


def _active_throughput(log: SampleLog, batch: int, paused_ns: int) -> Throughput:
    """Inferences per second of timing: from the first start to the last end, less the
    time profiling passes paused it (a new config's pass comes after its first second
    of timing, so a short run would otherwise read several times too slow)."""
    whole = span_throughput(len(log), log.first_start_ns, log.last_end_ns, batch)
    if not len(log) or paused_ns <= 0:
        return whole
    wall = float(log.last_end_ns - log.first_start_ns)
    active = wall - paused_ns
    if active <= 0:
        return whole
    return Throughput(whole.inferences_per_s * wall / active, whole.samples_per_s * wall / active)
