"""Reading untrusted session files: cheap checks of the raw file, typed access to values,
validated JSON, and text made safe to print.

A session from a teammate is untrusted input. Nothing here unpickles or evaluates: values
are checked for their SQL type, JSON is parsed with `json.loads` and its shape checked,
and text meant for a terminal has its control characters escaped.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, TypeVar

from engine.errors import SessionFileError, one_line
from engine.files import finite

SQLITE_MAGIC = b"SQLite format 3\x00"
HEADER_BYTES = 100

T = TypeVar("T")


def check_file(path: Path, *, allow_empty: bool = False) -> None:
    """Fail with a one-line SessionFileError unless `path` looks like a whole SQLite file:
    it exists, is a file, starts with SQLite's magic, and is as long as its header says.
    An empty file passes only with `allow_empty` (the writer initialises it)."""
    try:
        if not path.exists():
            raise SessionFileError("file not found", path)
        if path.is_dir():
            raise SessionFileError("is a folder, not a session file", path)
        if not path.is_file():  # a FIFO would block the open forever; a device, a socket
            raise SessionFileError("not a regular file (a pipe, device or socket)", path)
        size = path.stat().st_size
        with path.open("rb") as fh:
            header = fh.read(HEADER_BYTES)
    except OSError as exc:
        raise SessionFileError(f"cannot read ({exc.strerror or exc})", path) from exc
    if size == 0:
        if allow_empty:
            return
        raise SessionFileError("empty file, not an OpScope session", path)
    if len(header) < HEADER_BYTES or not header.startswith(SQLITE_MAGIC):
        raise SessionFileError("not an OpScope session (not an SQLite database)", path)
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    counter_valid = header[24:28] == header[92:96]
    wal = Path(f"{path}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return  # a live or killed WAL session: the main file may lag its header mid-checkpoint
    if counter_valid and pages and size < pages * page_size:
        raise SessionFileError(
            f"truncated file ({size} bytes of the {pages * page_size} its header declares)", path
        )


def corrupt(path: Path, exc: sqlite3.Error | ValueError) -> SessionFileError:
    """The error for a file SQLite cannot read, or whose values are not what we wrote."""
    if isinstance(exc, sqlite3.DatabaseError) and "not a database" in str(exc):
        return SessionFileError("not an OpScope session (not an SQLite database)", path)
    return SessionFileError(f"corrupt session file ({one_line(exc)})", path)


def typed(value: object, kind: type[T], what: str, *, nullable: bool = False) -> T | None:
    """`value` if it has SQL type `kind` (int also passes as float); ValueError otherwise."""
    if value is None:
        if nullable:
            return None
        raise ValueError(f"{what} is missing")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)  # type: ignore[return-value]
    if isinstance(value, kind) and not isinstance(value, bool):
        return value
    raise ValueError(f"{what} is not {'a number' if kind is not str else 'text'}")


def req(value: object, kind: type[T], what: str) -> T:
    """Like `typed`, but NULL is an error."""
    out = typed(value, kind, what)
    assert out is not None
    return out


def parse_json(text: object, kind: type[T], what: str) -> T | None:
    """A JSON column: NULL stays None; otherwise text holding a JSON value of `kind`."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise ValueError(f"{what} is not JSON text")
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
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():
        return text
    out: list[str] = []
    for ch in text:
        if ch.isprintable():
            out.append(ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return "".join(out)
