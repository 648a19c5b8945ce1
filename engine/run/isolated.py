"""`run_isolated`: a job (engine/run/child_job.py) run from plain Python in a child process
of its own, waited for: a tune trial, which may crash the runtime, is a job in its own
process (engine/tune/trial.py), not a command line. Where its caller says so, the job is
forked from the warm fork server (engine/run/job_start.py) instead of a fresh interpreter.
(The parent's side apart from the child's, so that job_start, which starts the child's
side, and this, which chooses how to start it, import each other in one direction only.)"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from typing import Any

from engine.events import Event
from engine.run.child_job import STOP_GRACE_S, Job, _sigint_ignored
from engine.run.job_start import isolated_context, start_args


@dataclass
class Isolated:
    """How a job run in a child process ended: `status` "done" (with `result`), "failed"
    (`error`, one line), "timeout", "cancelled" (stopped by a signal from elsewhere), or
    "crashed" (`exitcode`: the child died without a
    word, a native library's crash or a kill)."""

    status: str
    result: Any = None
    error: str = ""
    exitcode: int | None = None


def run_isolated(
    job: Job,
    args: tuple[Any, ...],
    timeout_s: float,
    on_events: Callable[[list[Event]], None] | None = None,
    grace_s: float = STOP_GRACE_S,
    start: str = "if_warm",
) -> Isolated:
    """Run `job(*args)` in a child process of its own (a crash there ends that job only)
    and wait for it: the same job interface the engine host uses for the window
    (host_jobs.py). The child gets SIGTERM if this process dies (Linux), and ends as Ctrl+C
    ends a command: an interruption here, or the timeout, stops it with SIGTERM and waits
    up to `grace_s` for it to mark its run cancelled and close its session file.

    `start` (engine/run/job_start.py): "spawn", a fresh interpreter; "warm", forked from
    this process's fork server, started first if need be (a tune's many trials: each
    skips the interpreter's start and imports, ~1 CPU-s); "if_warm" (default), forked
    only where this process started its server already, else spawned (a one-off job)."""
    ctx = isolated_context(start)  # no threads or locks inherited either way
    parent, child = ctx.Pipe(duplex=False)
    target, targs = start_args(child, job, args, ctx)
    proc = ctx.Process(target=target, args=targs, name="opscope-job")
    with _sigint_ignored():  # a terminal's Ctrl+C reaches the whole process group: the
        proc.start()  # child hears of it from this process (SIGTERM), once, cleanly
    child.close()
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                _stop(proc, grace_s)
                return Isolated("timeout")
            if not parent.poll(min(left, 0.5)):
                if not proc.is_alive() and not parent.poll(0):
                    break
                continue
            try:
                kind, payload = parent.recv()
            except (EOFError, OSError):
                break
            if kind == "events":
                if on_events is not None:
                    on_events(payload)
            elif kind == "done":
                return Isolated("done", result=payload)
            elif kind == "cancelled":
                return Isolated("cancelled")
            else:
                return Isolated("failed", error=str(payload))
    except BaseException:
        _stop(proc, grace_s)
        raise
    finally:
        proc.join(grace_s)  # the pipe still open: a forked job takes its close for this
        if proc.is_alive():  # process's end and stops (die_with_reader)
            proc.kill()
            proc.join()
        parent.close()
    return Isolated("crashed", exitcode=proc.exitcode)


def _stop(proc: BaseProcess, grace_s: float) -> None:
    if proc.is_alive():
        proc.terminate()  # SIGTERM: the child ends as Ctrl+C ends a command
        proc.join(grace_s)
    if proc.is_alive():
        proc.kill()
        proc.join()
