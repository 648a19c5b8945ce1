"""The typed events every long engine operation yields.

Consumers (the CLI printer, the session recorder, the GUI client) receive these and never
reach back into the engine. Every yield is a progress point and a cancellation point.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from engine.config import RunConfig

# AccuracyResult is measure/accuracy.py's result, sent as an event too.
from engine.measure.accuracy import AccuracyResult as AccuracyResult
from engine.measure.contention import Contention
from engine.measure.stats import LatencyStats, Throughput
from engine.model.info import ModelInfo


@dataclass(frozen=True, slots=True)
class Progress:
    """A step of long work: `done` of `total` (None when unknown)."""

    stage: str  # "load", "variant", "calibration", "session", "warmup", "timing", ...
    done: float
    total: float | None
    message: str = ""


@dataclass(frozen=True, slots=True)
class Notice:
    """Something the user should know (a fallback, a default chosen for them)."""

    level: str  # "info" | "warning" | "note" (recorded with the run, not shown)
    message: str


@dataclass(frozen=True, slots=True)
class ModelLoaded:
    info: ModelInfo


@dataclass(frozen=True, slots=True)
class VariantReady:
    """The model file actually run, and what building it took."""

    precision: str
    path: str
    build_s: float
    cached: bool
    nodes_original: int
    nodes: int | None = None  # after ORT's graph optimisation, once a session exists
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunStarted:
    config: RunConfig  # threads as actually used
    provider_requested: str
    provider_used: str
    providers: tuple[str, ...]
    inputs: dict[str, tuple[tuple[int, ...], str]]  # name -> (shape, dtype)
    batch: int
    session_create_s: float
    host: str | None = None  # the machine it runs on, as the engine host names it (None: here)
    # that machine's facts (engine/session/env.py's host_facts), on an engine host's first
    # run: a session recorded from a window on another machine keeps them (meta machine:HOST)
    machine: dict[str, str | None] | None = None


@dataclass(frozen=True, slots=True)
class LatencyBatch:
    """Raw per-inference samples since the last batch (ns, starts relative to timing start)."""

    starts_ns: np.ndarray
    latencies_ns: np.ndarray
    origin_ns: int = 0  # time.perf_counter_ns() at the run's timing start (same clock as t_ns)


@dataclass(frozen=True, slots=True)
class TimingDone:
    latency: LatencyStats
    throughput: Throughput
    stable: bool
    warmup_runs: int
    elapsed_s: float
    contention: Contention | None = None  # how busy the machine was over the timed samples


@dataclass(frozen=True, slots=True)
class ContentionSample:
    """How busy the machine was over the last window of a timing pass (about a second):
    the live recording keeps one per window, the run's figure is their combination."""

    t_ns: int  # time.perf_counter_ns() at the window's end
    contention: Contention


@dataclass(frozen=True, slots=True)
class OpProfile:
    """One profiling pass, parsed. `trace` keeps the raw per-inference node rows."""

    ops: list[Any]  # list[engine.measure.op_stats.OpStat], per node
    op_types: list[Any]  # per op type
    coverage: float  # summed node time / model_run time
    runs: int
    provider_nodes: dict[str, int]  # nodes per provider, as the profile says
    trace: Any  # engine.measure.op_trace.ProfileTrace
    profile_overhead: float | None = None  # profiled mean run / timed mean - 1
    phase: str | None = None  # a generating model's: "prefill" or "decode" (else None)
    contention: Contention | None = None  # how busy the machine was during the pass


@dataclass(frozen=True, slots=True)
class Telemetry:
    """One sample of machine state: `values` keyed by metric name
    (see engine/machine/cpu_telemetry.py)."""

    t_ns: int  # time.perf_counter_ns() (CLOCK_MONOTONIC, shared by processes on a host)
    values: dict[str, float]


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """The engine host is alive: beat `seq` since it started, sent every second from a thread
    of its own (engine/run/heartbeat.py) whatever its main loop does; never recorded."""

    seq: int


@dataclass(frozen=True, slots=True)
class Marker:
    """A labelled moment on the latency curve, e.g. a config change ("INT8 dynamic")."""

    kind: str  # "config" | "note" | "profile"
    label: str
    t_ns: int  # time.perf_counter_ns() on the engine host


@dataclass(frozen=True, slots=True)
class CommandFailed:
    """A command to the live engine failed; what was running before keeps running."""

    command: str  # "load" | "apply" | "profile" | ...
    message: str  # one line, naming the file and cause


@dataclass(frozen=True, slots=True)
class JobUpdate:
    """A job the engine host runs for the window (engine/run/host_jobs.py): `kind` "events"
    (`payload` a list of the job's events and results), then one of "done" (its result),
    "failed" (one line) or "cancelled"."""

    job_id: int
    kind: str
    payload: Any


@dataclass(frozen=True, slots=True)
class RunEnded:
    status: str  # "ok" | "cancelled" | "error"
    error: str | None = None


@dataclass(frozen=True, slots=True)
class PeaksMeasured:
    """The engine host's machine's peaks (`engine.machine.peaks.load_peaks`): its cached ones
    once, or measured with timing paused because none were cached (or a GPU run needed the
    GPU's, or operators beat the cached roofs). The window's roofline uses these, never its
    own machine's, when the host is elsewhere."""

    peaks: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ServingStarted:
    """A serving run's set-up (a load run, or a simulated one): traffic, batching and cache
    as JSON (`TrafficSpec.to_json`, `BatchPolicy.to_json`), the warm-up excluded from its
    figures, and, for a simulated run, the calibration it drew service times from."""

    traffic: dict[str, Any]
    batching: dict[str, Any]
    cache: dict[str, Any]
    warmup_s: float
    simulated: bool
    calibration: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ServedRequests:
    """Requests that ended since the last event (any outcome, warm-up included), those that
    arrived since and still wait (outcome 3, unserved: a later event brings them again with
    their end), and the batches that ran since, as arrays. Times are seconds from the
    schedule's start; NaN where a request has none (a cache hit was never dequeued, a
    rejected one never done).
    `origin_ns` is time.perf_counter_ns() at that start (0 for a simulated run)."""

    index: np.ndarray  # int64: the request's number in the run
    scheduled: np.ndarray
    sent: np.ndarray
    dequeued: np.ndarray
    done: np.ndarray
    batch: np.ndarray  # int64, -1: none
    hit: np.ndarray  # bool
    outcome: np.ndarray  # int8: 0 ok, 1 rejected, 2 timed out, 3 unserved (waiting)
    batch_id: np.ndarray  # int64: the batches that ran since the last event
    batch_start: np.ndarray
    batch_end: np.ndarray
    batch_size: np.ndarray  # int64
    batch_instance: np.ndarray  # int64
    origin_ns: int = 0
    at_s: float = float("nan")  # when this report was made (s from the schedule's start)
    queued: int = 0  # requests waiting then
    queue_peak: int = 0  # the most waiting at once since the last report


@dataclass(frozen=True, slots=True)
class ServingSummary:
    """A serving run's figures as `opscope load --json` writes them (`summary`), and the
    simulator's answers when asked (`answers`: max_rate, find, trials, curve)."""

    summary: dict[str, Any]
    answers: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GenerationStarted:
    """A generation run's shape: prompt and output lengths, sequences at once, how tokens
    are chosen, the model's context, and what one token of one sequence takes in the cache."""

    prompt_len: int
    new_tokens: int
    batch: int
    sampling: str  # "greedy" or "temperature T, top-k K, seed S"
    context_length: int
    kv_bytes_per_token: int


@dataclass(frozen=True, slots=True)
class GenerationSteps:
    """One timed generation (warm-up excluded): `steps_ns[0]` the time to the first token
    (the prefill and its choice), then each decode step's; `start_ns` from the timing's
    origin (`origin_ns`, time.perf_counter_ns())."""

    index: int
    start_ns: int
    steps_ns: np.ndarray  # int64
    origin_ns: int = 0


@dataclass(frozen=True, slots=True)
class GenerationSummary:
    """A generation run's figures as `opscope generate --json` writes them."""

    summary: dict[str, Any]


Event = (
    Progress
    | Notice
    | ModelLoaded
    | VariantReady
    | RunStarted
    | LatencyBatch
    | TimingDone
    | AccuracyResult
    | OpProfile
    | Telemetry
    | Heartbeat
    | Marker
    | CommandFailed
    | RunEnded
    | ContentionSample
    | PeaksMeasured
    | ServingStarted
    | ServedRequests
    | ServingSummary
    | GenerationStarted
    | GenerationSteps
    | GenerationSummary
    | JobUpdate
)


T = TypeVar("T")


def drive(gen: Generator[Any, None, T], on_item: Callable[[Any], object] | None = None) -> T:
    """Run a generator to its end, handing each item it yields to `on_item` (dropped when
    None), and return what it returns: for callers that need no cancellation point."""
    while True:
        try:
            item = next(gen)
        except StopIteration as stop:
            result: T = stop.value
            return result
        if on_item is not None:
            try:
                on_item(item)
            except BaseException:  # the generator cleans up now (a serving loop joins its
                gen.close()  # threads), not whenever it is collected
                raise
