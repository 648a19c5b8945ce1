"""A compact copy of a session, to hand to a teammate: `opscope session compact IN OUT`.

The copy holds every run, every latency sample, every statistic and every marker. It is
written in the current format (an older file's op rows become the compact `op_nodes` +
`op_times` of format v5) and vacuumed, so free pages left by deleted rows go. With
`keep_passes=N` it also drops the raw per-inference node rows of all but the last N
profiling passes of each run (their per-node and per-op-type statistics in `ops`, and
their `profiles` and `profile_runs` rows, stay): the summary of an older pass, not its
distributions. The source is only read.
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from engine.errors import SessionFileError, one_line
from engine.session.reader import SessionReader


@dataclass(frozen=True, slots=True)
class Compacted:
    """What a compact copy did: sizes in bytes, op rows dropped."""

    source_bytes: int
    copy_bytes: int
    op_rows_dropped: int


def compact_copy(src: str | Path, dest: str | Path, keep_passes: int | None = None) -> Compacted:
    """Write a compact copy of session `src` to `dest` (which must not exist). Raises a
    one-line SessionFileError for an unreadable source or an unwritable destination."""
    src, dest = Path(src), Path(dest)
    if keep_passes is not None and keep_passes < 0:
        raise ValueError(f"keep_passes must be >= 0, got {keep_passes}")
    if dest.exists() or dest.is_symlink():
        raise SessionFileError("already exists (a compact copy never overwrites)", dest)
    if not dest.parent.is_dir():
        raise SessionFileError(f"folder {dest.parent} does not exist", dest)
    with SessionReader.open(src) as reader:  # validated; an older file migrated in memory
        try:
            target = sqlite3.connect(str(dest), isolation_level=None)
        except sqlite3.Error as exc:
            raise SessionFileError(f"cannot write ({one_line(exc)})", dest) from exc
        try:
            target.execute("PRAGMA trusted_schema = OFF")  # its triggers call nothing unsafe
            reader.backup_to(target)
            dropped = _drop_old_op_rows(target, keep_passes) if keep_passes is not None else 0
            target.execute("VACUUM")
        except sqlite3.Error as exc:
            target.close()
            with contextlib.suppress(OSError):
                dest.unlink()
            raise SessionFileError(f"cannot write ({one_line(exc)})", dest) from exc
        target.close()
    SessionReader.open(dest).close()  # the copy reads back as a session
    return Compacted(src.stat().st_size, dest.stat().st_size, dropped)


def _drop_old_op_rows(conn: sqlite3.Connection, keep: int) -> int:
    """Delete op_times rows of all but the last `keep` passes of each run; say so in meta."""
    cur = conn.execute(
        "DELETE FROM op_times WHERE pass <= (SELECT MAX(p.pass) FROM profiles p "
        "WHERE p.run_id = op_times.run_id) - ?",
        [keep],
    )
    conn.execute(
        "INSERT INTO meta (key, value) VALUES ('op_rows_kept', ?) "
        "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
        [f"last {keep} profiling passes of each run (compact copy)"],
    )
    return int(cur.rowcount)
