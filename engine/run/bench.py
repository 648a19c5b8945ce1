"""One bench or profile run as a generator of events: prepare (the backend loads the model,
makes inputs, builds the variant), time, compare with FP32, profile. The CLI, the recorder
and the GUI's engine host all drive this same generator, on any backend."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from engine import backends
from engine.backends.base import PrepareRequest
from engine.config import oversubscribed
from engine.events import Event, LatencyBatch, Notice, RunEnded
from engine.machine.gpu_contention import window_for
from engine.model.inputs import empty_inputs
from engine.run.load_window import with_load
from engine.run.timing import TimingPlan, TimingSamples, time_inferences


@dataclass(frozen=True)
class BenchRequest(PrepareRequest):
    """What to run: the workload and how long; `profile` adds a profiling pass."""

    timing: TimingPlan = field(default_factory=TimingPlan)
    profile: bool = False
    profile_runs: int = 20
    check_accuracy: bool = True


def run_bench(req: BenchRequest) -> Iterator[Event]:
    """The whole run. Raises `OpScopeError` for problems the user can fix."""
    crowded = oversubscribed(req.workload.config.threads)
    if crowded:
        yield Notice("warning", crowded)
    prepared = yield from backends.backend_for(req.workload.config).prepare(req)
    empty = empty_inputs(prepared.feeds)
    if empty:
        yield Notice("warning", empty)
    try:
        samples = TimingSamples(np.empty(0, np.int64), np.empty(0, np.int64))
        drain = getattr(prepared, "drain_events", None)  # a generating model's passes
        load = window_for(prepared.provider_used)  # with the GPU's, on a GPU
        timing = time_inferences(
            prepared.run_once, req.timing, prepared.batch, samples=samples, window=load
        )
        for ev in timing:
            yield ev
            if drain is not None and isinstance(ev, LatencyBatch):
                yield from drain(ev.origin_ns)
        if req.check_accuracy and prepared.config.precision != "fp32":
            yield from prepared.accuracy(req.workload.inputs.inputs_npz is None)
        if req.profile:
            lats = samples.latencies_ns
            timed_mean = float(lats.mean() / 1e6) if lats.size else None
            yield from with_load(prepared.profile(req.profile_runs, timed_mean))
    finally:
        prepared.close()
    yield RunEnded("ok")
