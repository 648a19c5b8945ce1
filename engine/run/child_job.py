"""Long engine work in a child process of its own: `child_main` drives a generator of
events and sends them back over a pipe in batches, then its result or one line saying why
it failed. A crash in a native library ends the child, not its parent; cancelling is
killing the child. (The app's LLM Serving dock runs its calibration, simulations and real
serving runs this way: the real loop's threads and timing stay out of the window's.)

This is the job's side, what runs in its process (and `describe_exit`, its end in words).
`run_isolated` (engine/run/isolated.py) runs a job the same way from plain Python and waits
for it: a tune trial, which may crash the runtime, is a job in its own process
(engine/tune/trial.py), not a command line."""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from collections.abc import Callable, Generator, Iterator
from multiprocessing.connection import Connection
from typing import Any

from engine import interrupt
from engine.errors import OpScopeError
from engine.events import Event

SEND_S = 0.1  # events go back at most ten times a second
STOP_GRACE_S = 10.0  # an interrupted job's time to mark its run and close its session
PR_SET_PDEATHSIG = 1

Job = Callable[..., Generator[Event, None, Any]]


def child_main(conn: Connection, job: Job, args: tuple[Any, ...]) -> None:
    """Run `job(*args)`; sends ("events", [Event, ...]) batches, then ("done", result) or
    ("failed", one line), or ("cancelled", ...) when interrupted (SIGTERM as Ctrl+C)."""
    batch: list[Event] = []
    last = time.monotonic()
    gen: Generator[Event, None, Any] | None = None
    try:
        gen = job(*args)
        while True:
            try:
                batch.append(next(gen))
            except StopIteration as stop:
                result = stop.value
                break
            if _postponed.is_set():  # a stop that landed mid-import: taken here, a step
                _postponed.clear()
                raise KeyboardInterrupt(interrupt.signal_name or "SIGTERM")
            now = time.monotonic()
            # an event that says so (a graph to draw before the long step that follows:
            # graph_job.GraphSoFar) goes at once, not with the next one seconds later
            if now - last >= SEND_S or getattr(batch[-1], "send_now", False):
                conn.send(("events", batch))
                batch, last = [], now
        if batch:
            conn.send(("events", batch))
        conn.send(("done", result))
    except KeyboardInterrupt as exc:  # cancelled (SIGTERM): the job keeps what it measured
        if gen is not None:  # arrived here, between the job's steps: the job hears it too,
            with contextlib.suppress(KeyboardInterrupt, StopIteration):  # as from within,
                item = gen.throw(exc)  # and what it yields as it stops still goes back
                while True:
                    batch.append(item)
                    item = next(gen)
        _send_failure(conn, batch, "cancelled", kind="cancelled")
        raise
    except OpScopeError as exc:
        _send_failure(conn, batch, str(exc))
    except Exception as exc:  # a bug: one line for the user, the traceback on stderr
        traceback.print_exc()
        _send_failure(conn, batch, f"internal error: {exc!r}")
    finally:
        conn.close()


def describe_exit(code: int | None, who: str = "the engine host") -> str:
    """A dead child's exit in words: 'the engine host crashed (SIGSEGV)', '... was killed
    (SIGKILL)', '... exited with code 1'."""
    import signal

    if code is None:
        return f"{who} stopped responding"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        verb = "was killed" if name in ("SIGKILL", "SIGTERM") else "crashed"
        limit = _address_limit() if name == "SIGABRT" else None
        if limit:  # a job inherits its parent's limits (engine/run/job_start.py)
            return (
                f"{who} crashed ({name}) under an address-space limit of {limit} "
                "(ulimit -v): a native allocation that fails there aborts the process"
            )
        return f"{who} {verb} ({name})"
    return f"{who} exited with code {code}"


def _address_limit() -> str | None:
    """This process's address-space limit (`ulimit -v`) in words; None when unlimited.
    ONNX Runtime answers a failed allocation with std::bad_alloc, uncaught in its threads:
    SIGABRT, which alone does not say that memory ran out (stop 62's fuzz, 3 GB)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):  # no such limit here (Windows)
        return None
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return None
    from engine.model.sizes import size_text

    return size_text(soft)


def _send_failure(conn: Connection, batch: list[Event], message: str, kind: str = "failed") -> None:
    try:
        if batch:
            conn.send(("events", batch))
        conn.send((kind, message))
    except OSError:  # the parent went away
        pass


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored while a child starts, so that it starts with SIGINT ignored (Python
    keeps an inherited SIG_IGN): a Ctrl+C mid-start would otherwise end it with a
    traceback from its bootstrap. Only the main thread may change handlers; other threads
    (the window's, Ray's workers) get no terminal signals anyway."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _isolated_main(conn: Connection, job: Job, args: tuple[Any, ...]) -> None:
    """The child of `run_isolated`: dies with its parent, takes SIGTERM as Ctrl+C (the
    job's recording marks its run cancelled), then runs the job as `child_main` does."""
    import signal
    import sys

    _die_with_parent()

    def stop(signum: int, frame: Any) -> None:
        first = not interrupt.received.is_set()
        interrupt.mark(signal.Signals(signum).name)
        if first and not interrupt.deferring():  # once: a second SIGTERM (the parent ending
            if interrupt.importing(frame):  # an exception raised inside a native module's import
                _postponed.set()  # can abort the process from C++ ("terminate ... what():"):
                return  # raised instead at the job's next step (child_main)
            raise KeyboardInterrupt(signal.Signals(signum).name)  # too) must not cut short
        # the job's own stopping (a sweep storing its points done); a kill ends it if stuck

    signal.signal(signal.SIGTERM, stop)
    try:
        child_main(conn, job, args)
    except KeyboardInterrupt:
        sys.exit(130)


_postponed = threading.Event()  # a stop that arrived mid-import, raised at the next step


def die_with_reader(conn: Connection) -> None:
    """SIGTERM to this process once the other end of `conn` (the one reading its events)
    is closed: its reader died, even by SIGKILL. A job forked from the fork server is the
    server's child, not its host's (engine/run/job_start.py): PR_SET_PDEATHSIG does not
    see the host go, and a write to the closed pipe only fails at the next event."""
    import os
    import select
    import signal

    if not hasattr(select, "poll"):
        return
    fd = os.dup(conn.fileno())  # its own: the job closes `conn` as it ends

    def watch() -> None:
        poller = select.poll()
        poller.register(fd, select.POLLERR | select.POLLHUP)
        while not poller.poll():
            pass
        os.kill(os.getpid(), signal.SIGTERM)  # the job ends as a cancelled one does

    threading.Thread(target=watch, name="opscope-job-reader-watch", daemon=True).start()


def _die_with_parent() -> None:
    """SIGTERM when the parent dies, even by SIGKILL (Linux), so no job outlives it."""
    import sys

    if sys.platform != "linux":
        return
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
