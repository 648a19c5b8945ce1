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

A forked job is not the host's child but the server's, so what a spawned child got from the
host at its start it gets from `forked_main`: the host's environment and working folder of
the moment, and its end with the host (the server's children would otherwise outlive a host
killed by SIGKILL: they hold the server open).

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
)
START_ENV = "OPSCOPE_JOB_START"  # "spawn": every job in a fresh interpreter (as before)

_lock = threading.Lock()
_failed = False  # the server could not start here: spawn from now on


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
    global _failed
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
    return True


def forked_main(
    conn: Connection, job: Any, args: tuple[Any, ...], env: dict[str, str], cwd: str
) -> None:
    """A forked job's start: the host's environment and folder of the moment, its end with
    the host, then the job as a spawned child runs it (child_job._isolated_main)."""
    from engine.run.child_job import _isolated_main, die_with_reader

    os.environ.clear()
    os.environ.update(env)
    with contextlib.suppress(OSError):
        os.chdir(cwd)
    die_with_reader(conn)
    _isolated_main(conn, job, args)


def start_args(conn: Connection, job: Any, args: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
    """The target and arguments of a job's process in `context()`'s way of starting."""
    from engine.run.child_job import _isolated_main

    if context().get_start_method() == "forkserver":
        return forked_main, (conn, job, args, dict(os.environ), os.getcwd())
    return _isolated_main, (conn, job, args)
