"""Opening a session file read-only without creating anything beside it (no -wal, no
-shm, no journal): SQLite's read-only and immutable modes, a private copy where a -wal
must be read, an older format migrated in memory, and how the file was found (WAL mode:
a writer may have it open)."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

from sqlite_utils import Database

from engine.errors import SessionFileError
from engine.session import held, schema
from engine.session.trust import corrupt


def lenient_text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def undecodable(exc: sqlite3.OperationalError) -> bool:
    """Python's sqlite3 met a value that is not UTF-8 (read with the strict default, which
    is C-fast; a reader falls back to `lenient_text` only when a file needs it)."""
    return str(exc).startswith("Could not decode to UTF-8")


def connect_read_only(p: Path, header: bytes | None) -> tuple[sqlite3.Connection, str | None]:
    """Open without creating anything beside the file. mode=ro, except for a WAL file
    whose -wal or -shm is missing, where SQLite would create them (even read-only): with
    no -wal there is nothing beyond the main file and no writer (a live one keeps both), so
    it opens immutable; a -wal without its -shm is read from a private copy of both. When
    mode=ro fails (typically a WAL file in a read-only folder) the same two ways apply."""
    uri = p.resolve().as_uri() + "?mode=ro"
    wal, shm = Path(f"{p}-wal"), Path(f"{p}-shm")
    check_companions(p)
    try:
        if header is not None and wal_header(header) and not (wal.exists() and shm.exists()):
            return _private_or_immutable(p, uri)
        return _probe(_connect(uri)), None
    except sqlite3.DatabaseError as first:
        try:
            return _private_or_immutable(p, uri)
        except (sqlite3.DatabaseError, OSError):
            raise corrupt(p, first) from first


def check_companions(p: Path) -> None:
    """SQLite and the private copy below read FILE-wal and FILE-shm as files: a folder, a
    pipe or a device there ended in IsADirectoryError (or a hang). One line instead."""
    for side in (Path(f"{p}-wal"), Path(f"{p}-shm")):
        try:
            if not side.exists() or side.is_file():
                continue
            what = "a folder" if side.is_dir() else "not a regular file (a pipe, device or socket)"
        except OSError as exc:
            what = f"unreadable ({exc.strerror or exc})"
        raise SessionFileError(f"its {side.name} is {what}, so its recent writes cannot be read", p)


def _private_or_immutable(p: Path, uri: str) -> tuple[sqlite3.Connection, str | None]:
    """A private copy of the file and its -wal when there is one with content (and this
    process does not hold the file: reading it raw would drop our own locks, held.py);
    otherwise the file itself, opened immutable (SQLite then takes no locks and creates no
    -wal or -shm)."""
    wal = Path(f"{p}-wal")
    if wal.exists() and wal.stat().st_size > 0 and not held.is_held(p):
        tmpdir = tempfile.mkdtemp(prefix="opscope-session-")
        copy = Path(tmpdir) / "session.opscope"
        try:
            shutil.copyfile(p, copy)
            shutil.copyfile(wal, f"{copy}-wal")
        except OSError as exc:  # gone or changed since it was checked
            shutil.rmtree(tmpdir, ignore_errors=True)
            raise SessionFileError(f"cannot copy it to read ({exc.strerror or exc})", p) from exc
        try:
            return _probe(_connect(copy.as_uri() + "?mode=ro")), tmpdir
        except sqlite3.DatabaseError:
            shutil.rmtree(tmpdir, ignore_errors=True)
            raise
    return _probe(_connect(uri + "&immutable=1")), None


def _connect(uri: str) -> sqlite3.Connection:
    # Readers may be handed between threads (a GUI worker); each is used by one at a time.
    return sqlite3.connect(uri, uri=True, check_same_thread=False)


def _probe(conn: sqlite3.Connection) -> sqlite3.Connection:
    try:
        conn.execute("PRAGMA trusted_schema = OFF")  # no side-effecting SQL in its schema
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except (sqlite3.DatabaseError, UnicodeDecodeError):
        conn.close()
        raise
    return conn


def readable_version(p: Path, conn: sqlite3.Connection, header: bytes | None) -> int:
    version = schema.known_version(p, conn)
    if version is None:
        tables = schema.other_tables(conn)
        what = "an SQLite database with other tables" if tables else "an empty SQLite database"
        if (
            not tables
            and header is not None
            and wal_header(header)
            and not Path(f"{p}-wal").exists()
        ):
            what += f"; a session being written keeps its data in {p.name}-wal: copy that too"
        raise SessionFileError(f"not an OpScope session ({what})", p)
    return version


def wal_header(header: bytes) -> bool:
    """The header's file-format bytes say WAL (2), so recent writes may sit in FILE-wal."""
    return header[18:20] == b"\x02\x02"


def migrated_in_memory(conn: sqlite3.Connection) -> sqlite3.Connection:
    """An older file's contents, migrated in an in-memory copy (the file is never written)."""
    memory = sqlite3.connect(":memory:", check_same_thread=False)
    conn.backup(memory)
    conn.close()
    schema.migrate(Database(memory))
    return memory


def close(conn: sqlite3.Connection, tmpdir: str | None, key: held.Key | None = None) -> None:
    try:
        conn.close()
    finally:
        held.release(key)
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)
