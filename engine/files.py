"""Writing files safely: strict JSON values and output that never destroys what its path
names (atomic for files, in place for FIFOs and devices), shared by the CLI's --json,
exports, reports and the session store; and reading JSON from outside (`loads_json`)."""

from __future__ import annotations

import errno
import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from engine.errors import OpScopeError


def finite(value: Any) -> Any:
    """NaN and infinities -> None (recursively), so the output is strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def write_atomic(
    target: str | Path,
    fill: Callable[[TextIO], object],
    newline: str | None = None,
    error: type[OpScopeError] = OpScopeError,
) -> None:
    """Write text output to `target` without destroying what the path names:
    - `-`: standard output;
    - a regular file, or a new one: through a temporary file renamed over it (a reader
      never sees half a file);
    - a symlink: followed, its target written as above (the link stays);
    - a FIFO or a device: written to in place, never replaced (a FIFO without a reader is
      refused, not waited on);
    - this process's own stdout or stderr (`/dev/stdout`, or the file `>` sent it to):
      written through that stream;
    - a folder or a socket: refused.
    OS errors become `error`, one line naming the file."""
    import sys

    given = Path(target)
    try:
        kind, path = ("stdout", given) if str(target) == "-" else output_kind(given)
    except OSError as exc:
        raise error(f"cannot write ({exc.strerror or exc})", given) from exc
    if kind in ("stdout", "stderr"):  # through our own stream: its offset, its buffer
        stream = sys.stdout if kind == "stdout" else sys.stderr
        try:
            fill(stream)
            stream.flush()
        except OSError as exc:
            raise error(f"cannot write ({exc.strerror or exc})", given) from exc
        return
    if kind == "folder":
        raise error("is a folder: give a file name", given)
    if kind == "socket":
        raise error("is a socket: give a file name", given)
    if kind == "stream":
        _write_in_place(path, fill, newline, error, given)
        return
    tmp: str | None = None
    try:
        if not path.parent.is_dir():
            path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".opscope-", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as fh:
            fill(fh)
        # mkstemp makes the file private (0600); an export is an ordinary file
        os.chmod(tmp, path.stat().st_mode & 0o777 if path.exists() else 0o644)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise error(f"cannot write ({exc.strerror or exc})", given) from exc
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def output_kind(path: Path) -> tuple[str, Path]:
    """What an output path names, symlinks followed: ("file" | "new" | "folder" | "socket"
    | "stream" (a FIFO or a device) | "stdout" | "stderr" (this process's own), the path
    to write). Raises OSError for a path that cannot be looked at."""
    import stat

    real = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        st = os.stat(path)  # follows links: what a write would reach
    except FileNotFoundError:
        return "new", real
    if stat.S_ISDIR(st.st_mode):
        return "folder", real
    if stat.S_ISSOCK(st.st_mode):
        return "socket", real
    for fd, name in ((1, "stdout"), (2, "stderr")):  # /dev/stdout, or where > sent ours
        try:
            own = os.fstat(fd)
        except OSError:
            continue
        if (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino):
            return name, path
    if stat.S_ISREG(st.st_mode):
        return "file", real
    return "stream", path  # FIFO, character or block device: written to, not replaced


def _write_in_place(
    path: Path,
    fill: Callable[[TextIO], object],
    newline: str | None,
    error: type[OpScopeError],
    given: Path,
) -> None:
    """Write to a FIFO or a device through the path itself: never truncated or replaced.
    A FIFO with no reader is refused at once."""
    import stat

    flags = os.O_WRONLY | os.O_APPEND
    try:
        fifo = stat.S_ISFIFO(os.stat(path).st_mode)
        fd = os.open(path, flags | (os.O_NONBLOCK if fifo else 0))
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise error("is a FIFO with no reader: start its reader first", given) from exc
        raise error(f"cannot write ({exc.strerror or exc})", given) from exc
    try:
        if fifo:
            os.set_blocking(fd, True)  # the reader is there: wait for it as a pipe does
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline, closefd=True) as fh:
            fd = -1
            fill(fh)
    except OSError as exc:
        raise error(f"cannot write ({exc.strerror or exc})", given) from exc
    finally:
        if fd >= 0:
            os.close(fd)


def check_model_file(path: str | Path, extra_bytes: int = 0) -> None:
    """Refuse, before a byte is read, a model path that is not a regular file (a FIFO
    would block, a device such as /dev/zero never ends, a socket cannot be read) or that
    is larger than this machine's memory could hold (`extra_bytes`: its external data).
    Raises `ModelError`, one line naming the file; a missing path or a folder is left to
    the caller, which says what it expected there."""
    import stat

    from engine.errors import ModelError

    try:
        st = os.stat(path)  # follows links: what a read would reach
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ModelError(f"cannot read ({exc.strerror or exc})", path) from exc
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return
    if not stat.S_ISREG(mode):
        kind = (
            "a FIFO" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a plain file"
        )  # fmt: skip
        raise ModelError(f"is {kind}, not a model file: give a regular file", path)
    total = st.st_size + extra_bytes
    memory = machine_memory_bytes()
    if memory and total > memory:
        raise ModelError(
            f"is {total / 2**30:.1f} GiB, more than this machine's memory "
            f"({memory / 2**30:.1f} GiB) could hold",
            path,
        )


def machine_memory_bytes() -> int:
    """Physical memory of this machine in bytes (0 when the system does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return 0


def loads_json(text: str | bytes) -> Any:
    """json.loads for text from outside (a trace, a teammate's session, another machine's
    answer): JSON nested past the parser's depth is a ValueError like any other malformed
    JSON, not a RecursionError that every `except ValueError` lets through as a traceback
    (a Mooncake line of 100,000 "[" ended `load --llm` in one)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None
