"""Reading untrusted session files: cheap checks of the raw file, typed access to values,
validated JSON, and text made safe to print.

A session from a teammate is untrusted input. Nothing here unpickles or evaluates: values
are checked for their SQL type, JSON is parsed with `json.loads` and its shape checked,
and text meant for a terminal has its control characters escaped.
"""

from __future__ import annotations

import errno
import json
import sqlite3
from pathlib import Path
from typing import Any, TypeVar

from engine.errors import SessionFileError, escape_controls, one_line
from engine.files import finite
from engine.session.columns import bounded
from engine.session.held import read_head

SQLITE_MAGIC = b"SQLite format 3\x00"
HEADER_BYTES = 100

T = TypeVar("T")


def check_file(path: Path, *, allow_empty: bool = False) -> bytes | None:
    """Fail with a one-line SessionFileError unless `path` looks like a whole SQLite file:
    it exists, is a file, starts with SQLite's magic, and is as long as its header says.
    An empty file passes only with `allow_empty` (the writer initialises it). Returns the
    header read, or None when this process has the file open already (not read again)."""
    try:
        if not path.exists():
            raise SessionFileError("file not found", path)
        if path.is_dir():
            raise SessionFileError("is a folder, not a session file", path)
        if not path.is_file():  # a FIFO would block the open forever; a device, a socket
            raise SessionFileError("not a regular file (a pipe, device or socket)", path)
        size = path.stat().st_size
        header = read_head(path, HEADER_BYTES)
    except OSError as exc:
        raise SessionFileError(f"cannot read ({exc.strerror or exc})", path) from exc
    if header is None:
        return None  # open through SQLite in this process already (checked then; held.py)
    if size == 0:
        if allow_empty:
            return header
        raise SessionFileError("empty file, not an OpScope session", path)
    if len(header) < HEADER_BYTES or not header.startswith(SQLITE_MAGIC):
        raise SessionFileError("not an OpScope session (not an SQLite database)", path)
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    counter_valid = header[24:28] == header[92:96]
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return header  # a live or killed WAL session: the main file may lag mid-checkpoint
    if counter_valid and pages and size < pages * page_size:
        raise SessionFileError(
            f"truncated file ({size} bytes of the {pages * page_size} its header declares)", path
        )
    return header


# SQLite's primary result codes (`sqlite3.Error.sqlite_errorcode & 0xFF`)
SQLITE_BUSY = 5
SQLITE_LOCKED = 6
SQLITE_READONLY = 8
SQLITE_IOERR = 10
SQLITE_FULL = 13
SQLITE_CANTOPEN = 14


def sqlite_code(exc: BaseException) -> int | None:
    """SQLite's primary result code carried by `exc`, if any."""
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def is_locked(exc: BaseException) -> bool:
    """Another connection holds the lock this one needs (SQLITE_BUSY / SQLITE_LOCKED)."""
    return sqlite_code(exc) in (SQLITE_BUSY, SQLITE_LOCKED)


def error_text(exc: BaseException) -> str:
    """One line for an error met reading or writing a session. SQLite's own message can
    quote bytes of the file (a schema that is not UTF-8): Python then raises
    UnicodeDecodeError while decoding the message itself, whose bytes are shown escaped."""
    if isinstance(exc, UnicodeDecodeError) and isinstance(exc.object, bytes):
        raw = exc.object.decode("utf-8", "backslashreplace")
        return f"text that is not UTF-8: {one_line(ValueError(raw))}"
    return one_line(exc)


def corrupt(path: Path, exc: BaseException) -> SessionFileError:
    """The error for a file SQLite cannot read or write, or whose values are not what we
    wrote, named for its cause: locked, read-only, disk full, or corrupt."""
    text = error_text(exc)
    code = sqlite_code(exc)
    if code in (SQLITE_BUSY, SQLITE_LOCKED):
        return SessionFileError(f"session file locked by another process ({text})", path)
    if code == SQLITE_READONLY:
        return SessionFileError(f"read-only file or folder: cannot write to it ({text})", path)
    if code == SQLITE_FULL or getattr(exc, "errno", None) == errno.ENOSPC:
        return SessionFileError(f"disk full ({text})", path)
    if isinstance(exc, OSError):
        return SessionFileError(f"cannot read or write ({exc.strerror or text})", path)
    if code == SQLITE_IOERR:  # the device refused a read or write: not the file's fault
        return SessionFileError(
            f"cannot write to it ({text}: a full disk, a file-size limit or a failing device)",
            path,
        )
    if code == SQLITE_CANTOPEN:
        return SessionFileError(f"cannot open ({text})", path)
    if isinstance(exc, sqlite3.DatabaseError) and "not a database" in text:
        return SessionFileError("not an OpScope session (not an SQLite database)", path)
    return SessionFileError(f"corrupt session file ({text})", path)


def typed(value: object, kind: type[T], what: str, *, nullable: bool = False) -> T | None:
    """`value` if it has SQL type `kind` (int also passes as float) and lies within the
    bounds engine/session/columns.py declares for `what` ("table.column"); ValueError
    otherwise. Out of bounds reads as None when `nullable`."""
    if value is None:
        if nullable:
            return None
        raise ValueError(f"{what} is missing")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    elif not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"{what} is not {'a number' if kind is not str else 'text'}")
    return bounded(value, what, nullable)  # type: ignore[return-value]


def req(value: object, kind: type[T], what: str) -> T:
    """Like `typed`, but NULL is an error."""
    out = typed(value, kind, what)
    assert out is not None
    return out


def parse_json(text: object, kind: type[T], what: str) -> T | None:
    """A JSON column: NULL stays None; otherwise text holding a JSON value of `kind`.
    Text longer than the column's declared limit reads as None without being parsed.
    NaN and Infinity literals (OpScope writes null) parse as floats, for the field checks
    (engine/session/blobs.py, sweep_rows.py) to refuse or show as missing."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError(f"{what} is not JSON text")
    if bounded(text, what, nullable=True) is None:
        return None
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ValueError(f"{what} is not valid JSON") from exc
    if not isinstance(value, kind):
        raise ValueError(f"{what} is not a JSON {kind.__name__}")
    return value


def json_text(value: Any) -> str:
    """JSON for a column: NaN and infinities become null, so every JSON reader accepts it."""
    return json.dumps(finite(value), separators=(",", ":"), default=str)


def printable(value: object) -> str:
    """Text from a file, safe for a terminal: control and format characters (ANSI escapes,
    newlines, bidi overrides) are shown as escapes instead of acting on the terminal."""
    return escape_controls(value if isinstance(value, str) else str(value))
