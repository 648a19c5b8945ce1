"""One session file, written by several processes at once, as an afternoon in the window
does (#29): the window records while tune trials and sweeps (processes of their own)
append their runs, and the window reads the same file back (a session window, a report,
a compact copy). The corrupted afternoon came from the window's reads: closing any
descriptor of the file drops the process's SQLite locks, and the next writer to close
took itself for the last, checkpointed and deleted the WAL the window was still writing.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.session import SessionStore, held, open_session_file
from engine.session.compact_copy import compact_copy
from engine.session.trust import check_file
from tests.conftest import ROOT

ROWS = 300  # per writer and round: enough pages that a lost WAL tears the b-trees

# A writer in a process of its own, as `opscope bench --session FILE` (a tune trial) is.
CHILD = """
import sys
from engine.session.store import SessionStore
s = SessionStore.create_or_open(sys.argv[1])
with s.transaction():
    s.add_telemetry_rows([(None, i, "child", float(i)) for i in range(int(sys.argv[2]))])
s.close()
"""


def _write(store: SessionStore, name: str) -> None:
    with store.transaction():
        store.add_telemetry_rows([(None, i, name, float(i)) for i in range(ROWS)])


def _child_writes(path: Path) -> None:
    subprocess.run([sys.executable, "-c", CHILD, str(path), str(ROWS)], cwd=ROOT, check=True)


def _counts(path: Path) -> tuple[str, dict[str, int]]:
    conn = sqlite3.connect(path)
    try:
        (check,) = conn.execute("PRAGMA integrity_check").fetchone()
        rows = dict(conn.execute("SELECT name, COUNT(*) FROM telemetry GROUP BY name"))
    finally:
        conn.close()
    return check, rows


READERS: dict[str, Callable[[Path, Path], object]] = {
    "check_file": lambda p, tmp: check_file(p),
    "open_session_file": lambda p, tmp: open_session_file(p).close(),
    "runs (liveness)": lambda p, tmp: _runs(p),
    "compact_copy": lambda p, tmp: compact_copy(p, tmp / f"copy-{len(list(tmp.iterdir()))}"),
}


def _runs(p: Path) -> None:
    with open_session_file(p) as reader:
        reader.runs()


@pytest.mark.parametrize("read", READERS.values(), ids=list(READERS))
def test_reading_the_file_beside_its_recorder_keeps_every_write(
    tmp_path: Path, read: Callable[[Path, Path], object]
) -> None:
    path = tmp_path / "afternoon.opscope"
    copies = tmp_path / "copies"
    copies.mkdir()
    store = SessionStore.create_or_open(path)  # the window's recorder
    _write(store, "window")
    for _ in range(2):
        read(path, copies)  # in the window's process, the recording open
        _child_writes(path)  # a trial appends its run and closes
        _write(store, "window")
    store.close()
    check, rows = _counts(path)
    assert check == "ok"
    assert rows == {"window": 3 * ROWS, "child": 2 * ROWS}


def test_a_file_held_open_is_never_read_raw(tmp_path: Path) -> None:
    path = tmp_path / "s.opscope"
    store = SessionStore.create_or_open(path)
    assert held.is_held(path)
    assert held.read_head(path, 16) is None
    reader = open_session_file(path)
    store.close()
    assert held.is_held(path)  # the reader still has it
    reader.close()
    assert not held.is_held(path)
    assert held.read_head(path, 16) == b"SQLite format 3\x00"


def test_removing_a_session_takes_its_stale_wal_with_it(tmp_path: Path) -> None:
    """A -wal left by a killed writer beside a file that is then replaced would be replayed
    into the new file of the same name."""
    old = tmp_path / "old.opscope"
    store = SessionStore.create_or_open(old)
    _write(store, "old")
    store.db.conn.commit()
    stale = Path(f"{old}-wal").read_bytes()
    store.close()
    Path(f"{old}-wal").write_bytes(stale)  # as a kill -9 leaves it
    held_store = SessionStore.create_or_open(tmp_path / "other.opscope")
    from engine.session.store import remove_session_file

    remove_session_file(old)
    assert not old.exists() and not Path(f"{old}-wal").exists()
    with pytest.raises(Exception, match="open in this window"):
        remove_session_file(tmp_path / "other.opscope")
    held_store.close()
