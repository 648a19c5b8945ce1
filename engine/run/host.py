"""The engine host: a child process that runs the live engine and streams event batches.

The GUI spawns it, sends small commands, and receives lists of events (tens per second).
A native crash, an out-of-memory or a hung quantization here cannot take the window down,
and cancelling is killing. No Qt: the same loop can serve a remote client later.

`host_main` sets up the host's concerns and runs its loop: commands in (host_dispatch.py:
each acted on and moving the state of host_phases.py), one step of each running job (the
live loop, live_job.py, and the profiling passes, host_profiler.py, beside the window's
jobs in host_jobs.py; builds run in host_builder.py's worker threads), events out
(outbox.py); telemetry and the heartbeat on threads of their own (host_telemetry.py).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
from multiprocessing.connection import Connection

from engine.events import Notice
from engine.run.host_builder import Builder
from engine.run.host_dispatch import Dispatcher
from engine.run.host_jobs import HostJobs
from engine.run.host_phases import HostMachine, Phase
from engine.run.host_profiler import Profiler
from engine.run.host_telemetry import HostTelemetry, Sampler
from engine.run.job_start import warm as warm_job_starts
from engine.run.live import LiveRun
from engine.run.live_job import LiveJob
from engine.run.memory_trim import start_from_env as start_memory_trim
from engine.run.outbox import Outbox
from engine.run.sample_log import MAX_SAMPLES
from engine.run.wire import Channel, as_channel

IDLE_WAIT_S = 0.05  # how long the loop waits for a command when no job has a step to take
# what every ONNX build reads its model with: about 1 s of imports (4 s on a busy machine)
# that a first Load no longer waits for, since the window starts its host before a model
# is chosen (issue 53: time to the first latency point)
PRELOAD = ("onnx",)
# a host that ends while that import runs waits for it: a process finalized while another
# thread is inside a C++ extension's initialization can abort ("terminate called without
# an active exception", exit -6: 2 of 1,452 `opscope remote host` runs in the probe fuzz)
PRELOAD_JOIN_S = 120.0


def preload(modules: tuple[str, ...] = PRELOAD) -> threading.Thread:
    """Import `modules` on a thread of their own while the host waits for its first
    command (a build that needs one meanwhile waits for that import, not twice)."""

    def work() -> None:
        for name in modules:
            with contextlib.suppress(ImportError):  # a build reports it in one line
                importlib.import_module(name)

    thread = threading.Thread(target=work, name="opscope-preload", daemon=True)
    thread.start()
    return thread


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
    samplers: list[Sampler] | None = None,
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

    A live run keeps every sample for its summary, up to `max_samples`, in a temporary file
    with no name on disk (one block in memory: engine/run/sample_log.py); then it ends and
    the same config goes on in a new run (marked CONTINUED), so the host stays bounded."""
    conn = as_channel(pipe)  # data on the wire, never pickles (engine/run/wire.py)
    obtained = lower_priority(nice)  # before any thread starts: they inherit it
    start_memory_trim()  # only when OPSCOPE_MALLOC_TRIM_S asks (engine/run/memory_trim.py)
    out = Outbox(conn)
    telemetry = HostTelemetry(out, samplers, telemetry_interval_s)
    telemetry.start_heartbeat()  # the window's hang alarm listens for these
    loading = preload()
    if obtained > 0:
        out.put(
            Notice(
                "note",
                f"engine host ran at lower CPU priority (nice {obtained}) "
                "so the window stayed responsive; other busy processes slow "
                "it more than `opscope bench`",
            )
        )
    machine = HostMachine()
    builder = Builder(out)
    run = LiveRun(max_samples)
    profiler = Profiler(machine, run, out)
    live = LiveJob(machine, run, builder, out, telemetry.throttle, profiler.renew)
    jobs = HostJobs(out.put, stepped=[live, profiler])
    commands = Dispatcher(machine, live, builder, profiler, jobs, out)
    profiler.stop_asked = lambda: commands.shutdown_asked(conn)
    telemetry.start()
    warmed = False  # the jobs' fork server, started once the first latency point is out
    try:
        while machine.phase is not Phase.CLOSING:
            commands.receive(conn, 0 if jobs.busy else IDLE_WAIT_S)
            jobs.step()
            out.flush()
            if not warmed and run.segment is not None and len(run.segment.samples):
                warmed = True  # a job asked for earlier starts it itself (job_start.py)
                warm_job_starts()
    except (EOFError, BrokenPipeError, ConnectionResetError):  # the window is gone (killed)
        commands.closed()
    finally:
        telemetry.stop()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the window gone
            out.flush(force=True)
        loading.join(PRELOAD_JOIN_S)  # no finalizing beside a half-done import
