"""Opening a session file for writing: the connection, the checks that it is ours (or
empty) and that this version can write every column it fills, before anything changes;
then WAL, migrations and, for a new file, the facts about this machine; and why a file
cannot be written, named as such (a read-only folder is never "corrupt")."""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from sqlite_utils import Database

from engine.errors import SessionFileError
from engine.session import columns, schema
from engine.session.env import host_facts
from engine.session.schema import migrate
from engine.session.trust import SQLITE_CANTOPEN, SQLITE_READONLY, corrupt, sqlite_code

BUSY_TIMEOUT_S = 5.0


def utc_now() -> str:
    """ISO 8601 UTC with milliseconds, as every time stamp in the file is written."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def connect_for_writing(p: Path, busy_timeout_s: float = BUSY_TIMEOUT_S) -> sqlite3.Connection:
    # check_same_thread=False: the app feeds the recorder from its engine-reader thread;
    # the store is still used by one thread at a time.
    return sqlite3.connect(str(p), timeout=busy_timeout_s, check_same_thread=False)


def write_error(p: Path, exc: BaseException, created: bool) -> SessionFileError:
    """Why a session cannot be created or written. SQLite says only "unable to open
    database file" or "attempt to write a readonly database": a file or folder we may not
    write to is named as such (never "corrupt"); the rest by SQLite's code."""
    cause = exc.__cause__ if isinstance(exc, SessionFileError) else exc
    if not isinstance(cause, sqlite3.Error | OSError):
        return exc if isinstance(exc, SessionFileError) else corrupt(p, exc)
    if isinstance(cause, OSError) or sqlite_code(cause) in (SQLITE_READONLY, SQLITE_CANTOPEN):
        if created and not os.access(p.parent, os.W_OK):
            return SessionFileError(f"cannot create it: folder {p.parent} is read-only", p)
        if not created and not os.access(p.parent, os.W_OK):
            return SessionFileError(
                f"read-only folder {p.parent}: cannot write to the session in it", p
            )
        if not created and not os.access(p, os.W_OK):
            return SessionFileError("read-only file: cannot write to it", p)
    return corrupt(p, cause)


def initialise(p: Path, conn: sqlite3.Connection) -> Database:
    """Check the file is ours (or empty) before changing anything, then WAL, migrations
    and, for a new file, the facts about this machine."""
    try:
        version = writable_version(p, conn)
        if version is not None:
            check_writable_columns(p, conn, version)
        db = Database(conn)
        db.enable_wal()
        db.execute("PRAGMA synchronous=NORMAL")
        migrate(db)
        if version is None:
            with db.atomic():
                db.table("meta").upsert_all(
                    [{"key": k, "value": v} for k, v in host_facts().items()]
                    + [{"key": "created_at", "value": utc_now()}],
                    pk="key",
                )
        return db
    except (sqlite3.Error, ValueError, OSError) as exc:
        raise corrupt(p, exc) from exc


def writable_version(p: Path, conn: sqlite3.Connection) -> int | None:
    """The version of a file we may write to; None for a new (empty) database."""
    version = schema.known_version(p, conn)
    if version is None and schema.other_tables(conn):
        raise SessionFileError(
            "not an OpScope session (an SQLite database with other tables); "
            "refusing to write to it",
            p,
        )
    return version


def check_writable_columns(p: Path, conn: sqlite3.Connection, version: int) -> None:
    """Refuse, before anything is written, a file whose tables lack a column the writer
    fills (engine/session/columns.py declares them all): a recording into it would fail
    at its first insert, with a run already added. A file of an older format may lack the
    tables later migrations add, never a column of a table it has."""
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
    for table, missing in columns.missing_columns(conn).items():
        # a column a migration still to run adds is not lacking
        lacking = [c for c in missing if columns.COLUMNS[table][c].since <= version]
        if not lacking:
            continue
        if table not in tables and version < schema.SCHEMA_VERSION:
            continue  # added by a migration still to run
        if table in tables:
            what = f"{table} table lacks column {lacking[0]}"
        else:
            what = f"no {table} table"
        raise SessionFileError(
            "cannot take a recording: not a session this version can write "
            f"({what}); nothing was written to it",
            p,
        )
