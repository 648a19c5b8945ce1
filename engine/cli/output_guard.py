"""A command's stdout that cannot take its output (a full disk, a file-size limit, a closed
or vanished descriptor) is one line naming the cause, never a traceback: `opscope info M >
/dev/full` ended in `OSError: [Errno 28]` out of the printer (found by
bench/probe_fuzz.py). What stdout could not take is dropped, so that the interpreter's
flush at exit does not fail again."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO, cast

from engine.errors import OpScopeError


class OutputError(OpScopeError):
    """stdout refused a write."""


class _GuardedStdout:
    """sys.stdout for one command: its writes and flushes as before, an OSError (EPIPE
    aside: a reader that went away is the caller's BrokenPipeError) as an OutputError."""

    def __init__(self, stream: TextIO | None) -> None:
        self._stream = stream

    def _do(self, what: str, *args: Any) -> Any:
        if self._stream is None:
            raise OutputError("cannot write the output: stdout is closed")
        try:
            return getattr(self._stream, what)(*args)
        except BrokenPipeError:
            raise
        except (OSError, ValueError) as exc:  # ValueError: a closed file object
            why = getattr(exc, "strerror", None) or errno.errorcode.get(
                getattr(exc, "errno", 0) or 0, str(exc)
            )
            raise OutputError(f"cannot write the output to stdout ({why})") from None

    def write(self, text: str) -> int:
        return cast(int, self._do("write", text))

    def writelines(self, lines: Iterable[str]) -> None:
        self._do("writelines", lines)

    def flush(self) -> None:
        self._do("flush")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def guarded_stdout() -> Iterator[None]:
    """sys.stdout guarded while a command runs; the real one back after, what it could not
    take dropped (its descriptor pointed at /dev/null) when a write failed."""
    real = sys.stdout
    sys.stdout = cast(TextIO, _GuardedStdout(real))
    try:
        yield
    except OutputError:
        _drop(real)
        raise
    finally:
        sys.stdout = real


def _drop(real: TextIO | None) -> None:
    if real is None:
        return
    with contextlib.suppress(OSError, ValueError):
        fd = real.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    with contextlib.suppress(OSError, ValueError):
        real.flush()  # the pending text, to /dev/null now
