"""How the engine host starts its jobs' processes, warm (issue 53: the window's first graph
took 17-93 s on a busy machine, most of it a fresh interpreter importing onnx, 0.8 CPU-s,
before any graph work).

On Linux the jobs are forked from a fork server (the stdlib's `forkserver`) that has
imported, once, the heavy modules every job needs and that start no thread of their own:
numpy, onnx and the jobs' modules. ONNX Runtime is left out: importing it starts a thread,
and a fork copies none of a process's threads. The host starts the server when its first
latency point is out (`warm`, engine/run/host.py), so that it never delays that point; a job
asked for before then starts the server itself. Elsewhere (macOS, Windows, a frozen app)
and where the server cannot start, jobs are spawned as before: a fresh interpreter each.

`run_isolated` (engine/run/isolated.py) starts its jobs the same way where its caller
says it pays (bench/results/job_start_cost.md): a tune's trials and re-check
from a server the tune starts at its first trial (in the window the tune is itself a
forked job: its server is its own); a one-off job (the memory probe, a gate's candidate)
only from a server this process runs already, else spawned: starting a server for one
job costs what a spawn does.

A forked job is not the host's child but the server's, so what a spawned child got from the
host at its start it gets from `forked_main`: the host's environment, working folder,
resource limits and priority of the moment, and its end with the host (the server's
children would otherwise outlive a host killed by SIGKILL: they hold the server open).

A frozen app (the PyInstaller bundle, packaging/) spawns as before: the server is started
as the executable with a `-c` command, and the bundle built here answered that command
with its CLI's usage error ("invalid choice"), with or without interpreter flags, although
`multiprocessing.freeze_support()` runs first (app/entry.py)."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

# imported once in the fork server; each only if it imports (a missing one is skipped)
PRELOAD = (
    "numpy",
    "onnx",
    "engine.run.jobs",
    "engine.run.child_job",
    "engine.run.graph_job",
    "engine.model.info",
    "engine.model.graph_view",
    "engine.model.graph_layout",
    "engine.backends.ort.graph_as_run",
    # what the graph job imports on its way to its first graph besides (0.05 CPU-s)
    "psutil",
    "graphlay._native",
    "engine.files",
    "engine.model.graph_blocks",
    "engine.model.memory_need",
    "engine.measure.liveness",
    "engine.backends.ort.shape_infer",  # ONNX Runtime itself only when called
    # what a tune's trial, its re-check and the memory probe import besides (0.14 CPU-s):
    # the bench run, the session it records into (sqlite), the telemetry, the probe
    "engine.tune.trial",
    "engine.tune.recheck",
    "engine.run.bench",
    "engine.run.cli_telemetry",
    "engine.session.recording",
    "engine.backends.ort.backend",
    "engine.backends.ort.memory_probe",
)
START_ENV = "OPSCOPE_JOB_START"  # "spawn": every job in a fresh interpreter (as before)
# how `run_isolated` (engine/run/isolated.py) starts a job, chosen by its caller
SPAWN = "spawn"  # a fresh interpreter, always
WARM = "warm"  # forked from this process's server, started now if it is not yet (many jobs)
IF_WARM = "if_warm"  # forked when this process already started its server, else spawned
# the limits a spawned child would inherit from its parent, given to a forked one
RLIMITS = ("RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_RSS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE")

_lock = threading.Lock()
_failed = False  # the server could not start here: spawn from now on
_warmed = False  # this process started its server (`warm`): a job may be forked from it


def forking() -> bool:
    """Whether jobs start forked from the warm server (Linux, unless told otherwise)."""
    return (
        sys.platform == "linux"
        and not getattr(sys, "frozen", False)
        and not _failed
        and os.environ.get(START_ENV, "") != "spawn"
        and "forkserver" in mp.get_all_start_methods()
    )


def context() -> Any:  # SpawnContext | ForkServerContext (BaseContext has no Process)
    """The context a job's process starts in: the warm fork server's, or spawn's."""
    if not forking():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    return ctx


def warm() -> bool:
    """Start the fork server now (it imports PRELOAD while the caller goes on); whether
    jobs will be forked from it. Never raises: a server that cannot start means spawn."""
    global _failed, _warmed
    if not forking():
        return False
    from engine.run.child_job import _sigint_ignored

    context()
    with _lock:
        try:
            from multiprocessing import forkserver

            with _sigint_ignored():  # its children start with SIGINT ignored, as spawned ones
                forkserver.ensure_running()
        except Exception:  # no socket, no fork: spawn, as before
            _failed = True
            return False
        _warmed = True
    return True


def isolated_context(start: str) -> Any:  # SpawnContext | ForkServerContext
    """The context `run_isolated` starts a job in: `SPAWN`, `WARM` (the server started
    first if need be: a tune's trials) or `IF_WARM` (the server only where this process
    started one already: a one-off job would pay the server's start, as much as a spawn)."""
    if start not in (SPAWN, WARM, IF_WARM):
        raise ValueError(f"unknown job start {start!r}")
    if start == SPAWN or not forking() or (start == IF_WARM and not _warmed):
        return mp.get_context("spawn")
    if not warm():
        return mp.get_context("spawn")
    return context()


def forked_main(
    conn: Connection,
    job: Any,
    args: tuple[Any, ...],
    env: dict[str, str],
    cwd: str,
    limits: dict[str, tuple[int, int]] | None = None,
    nice: int | None = None,
) -> None:
    """A forked job's start: the host's environment, folder, resource limits (memory, CPU
    time: a `ulimit -v` set after the server started) and priority of the moment, its end
    with the host, then the job as a spawned child runs it (child_job._isolated_main)."""
    from engine.run.child_job import _isolated_main, die_with_reader

    os.environ.clear()
    os.environ.update(env)
    with contextlib.suppress(OSError):
        os.chdir(cwd)
    _inherit(limits or {}, nice)
    die_with_reader(conn)
    _isolated_main(conn, job, args)


def _inherit(limits: dict[str, tuple[int, int]], nice: int | None) -> None:
    """The parent's limits and niceness, where this process may take them (a limit only
    lowered, a priority only lowered, unless privileged)."""
    import resource

    for name, value in limits.items():
        with contextlib.suppress(OSError, ValueError, AttributeError):
            resource.setrlimit(getattr(resource, name), value)
    if nice is not None and hasattr(os, "setpriority"):
        with contextlib.suppress(OSError):
            if os.getpriority(os.PRIO_PROCESS, 0) != nice:
                os.setpriority(os.PRIO_PROCESS, 0, nice)


def _limits() -> dict[str, tuple[int, int]]:
    import resource

    out = {}
    for name in RLIMITS:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            out[name] = resource.getrlimit(getattr(resource, name))
    return out


def start_args(
    conn: Connection, job: Any, args: tuple[Any, ...], ctx: Any = None
) -> tuple[Any, tuple[Any, ...]]:
    """The target and arguments of a job's process in `ctx`'s (default: `context()`'s) way
    of starting."""
    from engine.run.child_job import _isolated_main

    if (ctx or context()).get_start_method() == "forkserver":
        nice = os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else None
        return forked_main, (conn, job, args, dict(os.environ), os.getcwd(), _limits(), nice)
    return _isolated_main, (conn, job, args)
