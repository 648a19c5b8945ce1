"""For the CLI: a command's recording into a session file, as a context (a no-op without
a file). A KeyboardInterrupt marks the run cancelled, any other exception an error; a file
that refused a write for good (a full disk) comes back as one line saying what was kept."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from engine import interrupt
from engine.config import RunConfig
from engine.errors import SessionFileError
from engine.events import Event
from engine.session.recorder import Recorder
from engine.session.write_queue import open_waiting


@contextlib.contextmanager
def recording(
    path: str | Path | None,
    *,
    model_path: str,
    kind: str = "bench",
    config: RunConfig | None = None,
    origin: dict[str, Any] | None = None,
) -> Iterator[Callable[[Event], None]]:
    """For the CLI: yields a `feed(event)` that records into `path` (a no-op when None).
    A KeyboardInterrupt marks the run cancelled, any other exception marks it an error
    with the exception's one-line text; both are re-raised. `origin`: who makes the run
    (engine/session/origins.py: a tune's trial); None for a run the user started."""
    with recorder_at(path, model_path=model_path, kind=kind, config=config, origin=origin) as rec:
        yield rec.feed if rec is not None else lambda ev: None


@contextlib.contextmanager
def recorder_at(
    path: str | Path | None,
    *,
    model_path: str,
    kind: str = "bench",
    config: RunConfig | None = None,
    origin: dict[str, Any] | None = None,
) -> Iterator[Recorder | None]:
    """`recording`, for a command that also writes through the recorder's store (a sweep
    stores itself as a whole): yields the Recorder, or None when `path` is None."""
    if path is None:
        yield None
        return
    store = open_waiting(path, _to_stderr)
    rec = Recorder(
        store, model_path=model_path, kind=kind, config=config, notify=_to_stderr, origin=origin
    )
    try:
        yield rec
    except KeyboardInterrupt:
        with contextlib.suppress(Exception):  # the interruption is the news, not this
            rec.cancel(interrupt.reason())
        raise
    except Exception as exc:
        with contextlib.suppress(Exception):
            if interrupt.received.is_set():  # the library's own error for the interruption
                rec.cancel(interrupt.reason())
            else:
                rec.fail(" ".join((str(exc) or type(exc).__name__).split()))
        if isinstance(exc, SessionFileError) and rec.writes.broken is exc:
            raise SessionFileError(f"{exc.message}; {rec.saved_line()}", exc.path) from exc
        raise
    finally:
        try:
            with contextlib.suppress(SessionFileError):  # raised above, once
                rec.close()
        finally:
            store.close()


def _to_stderr(line: str) -> None:
    print(f"session    {line}", file=sys.stderr, flush=True)
