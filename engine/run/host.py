"""The engine host: a child process that runs the live engine and streams event batches.

The GUI spawns it, sends small commands, and receives lists of events (tens per second).
A native crash, an out-of-memory or a hung quantization here cannot take the window down,
and cancelling is killing. No Qt: the same loop can serve a remote client later.

Commands are the dataclasses of engine/run/host_commands.py; the host's state is `HostState`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from engine import backends
from engine.backends.base import PrepareRequest
from engine.config import RunConfig
from engine.errors import OpScopeError
from engine.events import (
    CommandFailed,
    Event,
    JobUpdate,
    Marker,
    Notice,
    OpProfile,
    Progress,
    Telemetry,
)
from engine.machine.cpu_telemetry import CpuSampler, TelemetryThread
from engine.machine.gpu_telemetry import ThrottleWatch
from engine.run import host_commands as cmds
from engine.run.heartbeat import HeartbeatThread
from engine.run.host_jobs import HostJobs, ThreadJob
from engine.run.host_peaks import peaks_if_missing
from engine.run.jobs import on_loaded_model
from engine.run.live import LiveRun, Staged, stage
from engine.run.outbox import Outbox
from engine.run.sample_log import MAX_SAMPLES
from engine.run.serving_jobs import LoadedModel
from engine.run.wire import Channel, as_channel

PROFILE_EVERY_S = 30.0  # the first background pass after a config's own
CONTINUED = "timing continued"  # a run that reached its cap of samples goes on in a new one
PROFILE_MAX_EVERY_S = 240.0  # passes of an unchanged config back off to this


def next_profile_interval(every_s: float) -> float:
    """Background passes of one config come at 30, 60, 120, 240 s, then every 240 s: each
    pauses timing for seconds (a 323-node detector: 5-7 s) and an unchanged config's op
    times change little; a config change or Profile Now profiles at once."""
    return min(2.0 * every_s, PROFILE_MAX_EVERY_S)


class Builder:
    """Prepares one config in a worker thread; a newer request supersedes (generation)."""

    def __init__(self, out: Outbox) -> None:
        self._out = out
        self.generation = 0
        self.result: tuple[int, Staged] | None = None
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.label = ""  # what the newest build prepares

    @property
    def building(self) -> bool:
        """A build is still working (a superseded one too, until its next progress point):
        the running config's timing waits, or the build's CPU time would be in its
        samples (an INT8 search beside a live MiniLM made FP32 read 4-15 ms instead of
        2.7)."""
        self._threads = [t for t in self._threads if t.is_alive()]
        return bool(self._threads)

    def submit(self, req: PrepareRequest, label: str, command: str) -> None:
        self._cancel.set()  # the older build stops at its next progress point
        self._cancel = cancel = threading.Event()
        self.generation += 1
        gen = self.generation
        self.label = label
        thread = threading.Thread(
            target=self._work,
            args=(req, label, command, gen, cancel),
            name=f"opscope-build-{gen}",
            daemon=True,
        )
        self._threads.append(thread)
        thread.start()

    def cancel(self) -> None:
        self._cancel.set()
        self.generation += 1

    def take(self) -> Staged | None:
        with self._lock:
            result, self.result = self.result, None
        if result is None or result[0] != self.generation:
            return None  # stale: a newer request superseded it
        return result[1]

    def _work(
        self, req: PrepareRequest, label: str, command: str, gen: int, cancel: threading.Event
    ) -> None:
        events = stage(req, label)
        try:
            while True:
                if cancel.is_set():
                    events.close()
                    self._out.put(Notice("info", f"cancelled: {label}"))
                    return
                self._out.put(next(events))
        except StopIteration as stop:
            with self._lock:
                self.result = (gen, stop.value)
        except OpScopeError as exc:
            self._out.put(CommandFailed(command, str(exc)))
        except Exception as exc:  # a bug, but the old config keeps running
            self._out.put(CommandFailed(command, f"internal error: {exc!r}"))
            traceback.print_exc()


@dataclass
class HostState:
    """What the host remembers between commands."""

    path: str | None = None
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    dims: dict[str, int] = field(default_factory=dict)
    inputs: str | None = None
    calibration: str | None = None
    tokenizer: str | None = None
    config: RunConfig = field(default_factory=RunConfig)
    running: bool = True
    profile_due: bool = False
    last_profile: float = 0.0
    profile_every: float = PROFILE_EVERY_S
    stopped: Staged | None = None  # the config that Stop ended, for Start to resume
    peaks_tried: bool = False
    peaks_sent: bool = False  # the window has this host's peaks
    peaks_retry_at: float = 0.0  # provisional peaks: when to look for a quiet moment again
    throttle: ThrottleWatch = field(default_factory=ThrottleWatch)
    job: ThreadJob | None = None  # a load run or a calibration, timing paused meanwhile
    served: Staged | None = None  # the config it serves, resumed after it
    resume: bool = False  # timing was running when the job began
    new_tokens: int | None = None  # a generating model's, when the window set it

    def request(self, config: RunConfig) -> PrepareRequest:
        assert self.path is not None
        return PrepareRequest(
            str(self.path),
            config=config,
            shapes=self.shapes,
            dims=self.dims,
            inputs_npz=self.inputs,
            calibration_npz=self.calibration,
            tokenizer=self.tokenizer,
            new_tokens=self.new_tokens,
        )


def lower_priority(nice: int) -> int:
    """Lower this process's CPU priority by `nice` steps; returns the niceness obtained
    (0 when the platform refuses). On Linux niceness is per thread: threads started later
    inherit it from their creator, and those already running (a BLAS pool started by an
    import) are lowered here one by one."""
    import psutil

    if nice <= 0:
        return 0
    try:
        if not hasattr(os, "setpriority"):  # Windows: one priority class per process
            psutil.Process().nice(psutil.BELOW_NORMAL_PRIORITY_CLASS)
            return nice
        target = os.nice(nice)
        for thread in psutil.Process().threads():
            if os.getpriority(os.PRIO_PROCESS, thread.id) < target:
                os.setpriority(os.PRIO_PROCESS, thread.id, target)
        return target
    except (OSError, psutil.Error):
        return 0


def host_main(
    pipe: Connection | Channel,
    telemetry_interval_s: float = 0.1,
    nice: int = 0,
    samplers: list[Callable[[], dict[str, float]]] | None = None,
    max_samples: int = MAX_SAMPLES,
) -> None:
    """The child process's loop: commands in, event batches out, until shutdown.

    Telemetry comes from `samplers` (default: CPU, and NVML when a GPU is present); GPU
    throttling seen during a run is flagged on that run as soon as it appears. A heartbeat
    goes out every second from a thread of its own, even while this loop is inside a long
    profiling pass: the window calls the host hung only when those stop.

    `nice` > 0 runs the engine below the window's priority: when both want a core, the
    window gets it, so it stays responsive while the engine keeps every core busy; the
    engine loses only the CPU time the window actually uses. Other processes on the machine
    also win against it, which a run's notice records.

    A live run keeps every sample for its summary, up to `max_samples`; then it ends and
    the same config goes on in a new run (marked CONTINUED), so the host stays bounded."""
    conn = as_channel(pipe)  # data on the wire, never pickles (engine/run/wire.py)
    obtained = lower_priority(nice)
    out = Outbox(conn)
    heartbeat = HeartbeatThread(out.beat)  # the window's hang alarm listens for these
    heartbeat.start()
    if obtained > 0:
        out.put(
            Notice(
                "note",
                f"engine host ran at lower CPU priority (nice {obtained}) "
                "so the window stayed responsive; other busy processes slow "
                "it more than `opscope bench`",
            )
        )
    live = LiveRun(max_samples)
    builder = Builder(out)
    state = HostState()
    jobs = HostJobs(out.put)
    throttle = state.throttle

    def emit(ev: Telemetry) -> None:
        throttle.feed(ev.values)
        out.put(ev)

    if samplers is None:
        samplers = [CpuSampler().sample, *_gpu_samplers()]
    telemetry = TelemetryThread(emit, samplers, telemetry_interval_s)
    telemetry.start()
    try:
        paused: object = None  # the segment whose timing waits for a build
        while True:
            building = builder.building
            if building and paused is None and live.segment is not None and state.running:
                paused = live.segment
                out.put(Marker("pause", f"preparing {builder.label}", time.perf_counter_ns()))
            elif not building and paused is not None:
                seg = live.segment
                if seg is not None and seg is paused and builder.result is None:  # failed or
                    # cancelled: the same config again, a new run (no gap in its throughput)
                    resumed = dataclasses.replace(seg.staged, label="timing resumed")
                    _drain(live.end(), out)
                    _drain(live.begin(resumed), out)
                paused = None
            idle = live.segment is None or not state.running or state.job is not None or building
            if conn.poll(0.05 if idle else 0):
                cmd = conn.recv()
                if isinstance(cmd, cmds.Shutdown):
                    jobs.stop_all()  # the window closes: a load run ends now, unserved
                    _drain(live.end(), out)
                    break
                if isinstance(cmd, cmds.RunJob) and on_loaded_model(cmd.request):
                    _serving_job(cmd, state, live, jobs, out)
                elif isinstance(cmd, cmds.RunJob):
                    jobs.start(cmd.job_id, cmd.request)
                elif isinstance(cmd, cmds.CancelJob):
                    jobs.cancel(cmd.job_id)
                else:
                    _handle(cmd, state, live, builder, out)
            if state.job is not None:
                if not state.job.done.is_set():
                    out.flush()
                    continue
                served, state.job, state.served = state.served, None, None
                assert served is not None
                if state.resume and state.running:
                    state.throttle.reset()
                    resumed = dataclasses.replace(served, label="timing resumed")
                    _drain(live.begin(resumed), out)
                else:
                    state.stopped = served
            staged = builder.take()
            if staged is not None:
                old = live.segment.staged if live.segment is not None else state.stopped
                _drain(live.end(), out)
                throttle.reset()  # a new run: its own throttling
                _drain(live.begin(staged), out)
                state.stopped = None  # Start resumes the config now loaded, not that one
                if old is not None and old.prepared is not staged.prepared:
                    _retire(old)
                state.profile_due = True
                state.profile_every = PROFILE_EVERY_S
            if live.segment is not None and state.running and not building:
                ev = live.step()
                if ev is not None:
                    out.put(ev)
                    for extra in live.extra_events():
                        out.put(extra)
                if live.full and live.segment is not None:  # bounded: a new run goes on
                    continued = dataclasses.replace(live.segment.staged, label=CONTINUED)
                    _drain(live.begin(continued), out)
                flagged = throttle.fresh()
                if flagged is not None:
                    out.put(flagged)
                now = time.monotonic()
                if state.profile_due or now - state.last_profile > state.profile_every:
                    if not state.profile_due:  # a background pass: the next comes later
                        state.profile_every = next_profile_interval(state.profile_every)
                    state.profile_due = False
                    state.last_profile = now
                    ops = _profile(live, out)
                    peaks_if_missing(live, state, out, ops)
            out.flush()
    except (EOFError, BrokenPipeError, ConnectionResetError):  # the window is gone (killed)
        jobs.stop_all()  # a load run's threads leave the engine before this process ends
        print("opscope engine host: the window went away; stopping", file=sys.stderr)
    finally:
        telemetry.stop()
        heartbeat.stop()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the window gone
            out.flush(force=True)


def _handle(
    cmd: cmds.Command, state: HostState, live: LiveRun, builder: Builder, out: Outbox
) -> None:
    if isinstance(cmd, cmds.Load):
        if cmd.config is not None:  # the config to load it with (e.g. another engine)
            state.config = cmd.config
        state.path, state.shapes, state.inputs = cmd.path, dict(cmd.shapes), cmd.inputs_npz
        state.dims, state.calibration = dict(cmd.dims), cmd.calibration_npz
        state.tokenizer = cmd.tokenizer
        state.new_tokens = None
        _import_on_this_thread(state.config)
        builder.submit(state.request(state.config), f"load {Path(cmd.path).name}", "load")
    elif isinstance(cmd, cmds.Apply):
        old = live.config or state.config
        state.config = cmd.config
        if state.path is None:
            return
        try:
            label = backends.describe_change(cmd.config.resolved(), old.resolved())
        except OpScopeError as exc:
            out.put(CommandFailed("apply", str(exc)))
            return
        _import_on_this_thread(cmd.config)
        builder.submit(state.request(cmd.config), label, "apply")
    elif isinstance(cmd, cmds.Start):
        stopped, state.stopped = state.stopped, None
        if stopped is not None and live.segment is None:
            state.throttle.reset()
            resumed = dataclasses.replace(stopped, label="timing resumed")
            _drain(live.begin(resumed), out)  # a new run of the same config
        state.running = True
    elif isinstance(cmd, cmds.Stop):
        if live.segment is not None:
            state.stopped = live.segment.staged
            _drain(live.end(), out)
        state.running = False
    elif isinstance(cmd, cmds.Profile):
        state.profile_due = True
    elif isinstance(cmd, cmds.Cancel):
        builder.cancel()
        out.put(Progress("variant", 1, 1, "cancelled"))
    elif isinstance(cmd, cmds.GenerationShape):
        if state.path is None:
            return
        config = live.config or state.config
        state.shapes = {**state.shapes, "input_ids": (config.batch, cmd.prompt_len)}
        state.new_tokens = cmd.new_tokens
        label = f"prompt {cmd.prompt_len}, {cmd.new_tokens} new"
        builder.submit(state.request(config), label, "apply")
    elif isinstance(cmd, cmds.SetInputs):
        config = live.config or state.config
        changed = (
            cmd.dims != state.dims
            or cmd.inputs_npz != state.inputs
            or (cmd.tokenizer != state.tokenizer and cmd.inputs_npz is None)
            or (
                cmd.calibration_npz != state.calibration
                and config.precision in ("int8", "int8-static")
            )
        )
        state.dims, state.inputs = dict(cmd.dims), cmd.inputs_npz
        state.calibration = cmd.calibration_npz
        state.tokenizer = cmd.tokenizer
        if state.path is not None and changed:
            builder.submit(state.request(config), cmd.label, "apply")
    else:
        out.put(CommandFailed(type(cmd).__name__, f"unknown command {cmd!r}"))


def _retire(staged: Staged) -> None:
    """A config replaced by another: its session closed, its variant's cache entry no
    longer held (so the cache may evict it)."""
    with contextlib.suppress(Exception):  # a backend's close must never stop the host
        staged.prepared.close()


def _serving_job(
    cmd: cmds.RunJob, state: HostState, live: LiveRun, jobs: HostJobs, out: Outbox
) -> None:
    """Start a job on the model now loaded (a load run, a calibration), timing paused."""
    if state.job is not None:
        why = "a load run or calibration is still going: stop it first"
        out.put(JobUpdate(cmd.job_id, "failed", why))
        return
    staged = live.segment.staged if live.segment is not None else state.stopped
    if staged is None or state.path is None:
        out.put(JobUpdate(cmd.job_id, "failed", "no model is loaded yet"))
        return
    state.resume = live.segment is not None and state.running
    if live.segment is not None:
        _drain(live.end(), out)
    state.stopped = None
    model = LoadedModel(
        staged.prepared, state.path, staged.facts, state.request(staged.config), out.put
    )
    jobs.start(cmd.job_id, cmd.request, model)
    job = jobs.get(cmd.job_id)
    if isinstance(job, ThreadJob):
        state.job, state.served = job, staged
    else:  # it could not start: timing goes on as it was
        state.stopped = staged
        if state.resume:
            _drain(live.begin(dataclasses.replace(staged, label="timing resumed")), out)


def _import_on_this_thread(config: RunConfig) -> None:
    """Import the backend's engine library on the host's main thread before a worker does:
    torch.profiler (run on this thread) complains when torch was first imported on another
    one. Once, ~1 s for torch."""
    try:
        module = backends.get(config.engine).capabilities.requires
    except OpScopeError:
        return  # the build reports it in one line
    if module:
        with contextlib.suppress(ImportError):  # the build reports it in one line
            importlib.import_module(module)


def _profile(live: LiveRun, out: Outbox) -> list[Any] | None:
    """One profiling pass; its per-node stats (None when it failed)."""
    ops: list[Any] | None = None
    try:
        for ev in live.profile():
            if isinstance(ev, OpProfile):
                ops = ev.ops
            out.put(ev)
        out.flush(force=True)
    except OpScopeError as exc:
        out.put(CommandFailed("profile", str(exc)))
    return ops


def _drain(events: Iterator[Event], out: Outbox) -> None:
    for ev in events:
        out.put(ev)
    out.flush(force=True)


def _gpu_samplers() -> list[Callable[[], dict[str, float]]]:
    """The NVML sampler when a GPU is present (none otherwise)."""
    from engine.machine.gpu_telemetry import gpu_sampler_or_none

    gpu = gpu_sampler_or_none()
    return [gpu.sample] if gpu is not None else []
