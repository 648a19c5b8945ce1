"""Whether the user interrupted this process (Ctrl+C, SIGTERM, SIGHUP). A library that
turns the interruption into its own error (ONNX Runtime stopped mid-initialization says
"initialization failed") must not make a cancelled run read as a failed one: the recorder
and the command line ask here before they call an error an error.

A loop whose threads sit inside a library (the serving loop's instances in ONNX Runtime)
must not be torn out of its main thread by a KeyboardInterrupt: the interpreter would exit
with them still running and the C++ runtime abort ("terminate called without an active
exception"). Inside `deferred()` a signal only sets `received`; the loop polls it, stops
its threads, joins them and ends with what it measured."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

received = threading.Event()
signal_name = ""  # the signal that set `received` ("SIGINT", "SIGTERM", ...)
_deferring = 0  # how many `deferred()` blocks are open (signals land on the main thread)


def mark(name: str) -> None:
    """A signal arrived: say so to whoever polls."""
    global signal_name
    signal_name = signal_name or name
    received.set()


def deferring() -> bool:
    """Whether a signal should only be marked, not raised as KeyboardInterrupt."""
    return _deferring > 0


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """While open, an interruption is polled (`received`), never raised."""
    global _deferring
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1


def reason() -> str:
    """The cancelled run's reason, naming the signal."""
    name = signal_name if signal_name not in ("", "SIGINT") else "Ctrl-C"
    return f"interrupted ({name})"
