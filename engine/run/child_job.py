"""Long engine work in a child process of its own: `child_main` drives a generator of
events and sends them back over a pipe in batches, then its result or one line saying why
it failed. A crash in a native library ends the child, not its parent; cancelling is
killing the child. (The app's LLM Serving dock runs its calibration, simulations and real
serving runs this way: the real loop's threads and timing stay out of the window's.)"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Generator
from multiprocessing.connection import Connection
from typing import Any

from engine.errors import OpScopeError
from engine.events import Event

SEND_S = 0.1  # events go back at most ten times a second

Job = Callable[..., Generator[Event, None, Any]]


def child_main(conn: Connection, job: Job, args: tuple[Any, ...]) -> None:
    """Run `job(*args)`; sends ("events", [Event, ...]) batches, then ("done", result) or
    ("failed", one line)."""
    batch: list[Event] = []
    last = time.monotonic()
    try:
        gen = job(*args)
        while True:
            try:
                batch.append(next(gen))
            except StopIteration as stop:
                result = stop.value
                break
            now = time.monotonic()
            if now - last >= SEND_S:
                conn.send(("events", batch))
                batch, last = [], now
        if batch:
            conn.send(("events", batch))
        conn.send(("done", result))
    except OpScopeError as exc:
        _send_failure(conn, batch, str(exc))
    except Exception as exc:  # a bug: one line for the user, the traceback on stderr
        traceback.print_exc()
        _send_failure(conn, batch, f"internal error: {exc!r}")
    finally:
        conn.close()


def _send_failure(conn: Connection, batch: list[Event], message: str) -> None:
    try:
        if batch:
            conn.send(("events", batch))
        conn.send(("failed", message))
    except OSError:  # the parent went away
        pass
