"""Ctrl-C during a replay of a million requests due at once (issue 54): the loop hands the
whole backlog to the session as it arrives (a kill keeps it), and that write, a row at a
time from Python, took about 30 s; a signal meanwhile waited for it, so the command exited
130 half a minute after Ctrl-C. A backlog (waiting requests sent at their scheduled times,
numbered one after another) is now written a run per statement, parsed by SQLite itself;
every other row as before, and every row the same."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from engine.serve.records import OK, ServeRecords, served_requests
from engine.session.serving_rows import BACKLOG_RUN
from engine.session.store import SessionStore

COLUMNS = "i, scheduled_ns, sent_ns, dequeued_ns, done_ns, batch, hit, outcome"


def _ns(v: float) -> int | None:
    return None if v != v else round(v * 1e9)


def test_a_backlog_is_written_a_run_per_statement_with_every_row_as_it_was(
    tmp_path: Path,
) -> None:
    n = 20_000
    rec = ServeRecords.empty(n)
    rec.scheduled[:] = np.linspace(0.0, 0.002, n)  # a burst: all due within 2 ms
    rec.sent[:] = rec.scheduled
    rec.sent[5000:5003] += 1e-4  # three sent late by the traffic thread: row by row
    served = np.arange(10)  # the first ten ended, in two batches
    rec.dequeued[served], rec.done[served] = 0.001, 0.004
    rec.batch[served] = np.repeat([0, 1], 5)
    rec.outcome[served] = OK
    batches = (np.array([0.001, 0.002]), np.array([0.004, 0.005]), np.array([5, 5]),
               np.array([0, 0]))  # fmt: skip
    waiting = np.setdiff1d(np.arange(n), served)
    chunk = served_requests(rec, served, batches, 0, 1, waiting=waiting)

    store = SessionStore.create_or_open(tmp_path / "s.opscope")
    try:
        run_id = store.start_run({"kind": "load"})
        inserts: list[str] = []
        store.db.conn.set_trace_callback(
            lambda sql: inserts.append(sql) if sql.lstrip().upper().startswith("INSERT") else None
        )
        assert store.add_served(run_id, chunk) == n
        store.db.conn.set_trace_callback(None)
        rows = store.db.conn.execute(
            f"SELECT {COLUMNS} FROM requests WHERE run_id = ? ORDER BY i", [run_id]
        ).fetchall()
    finally:
        store.close()

    # before: one INSERT per request (20,002 with the batches); now one per run of the
    # backlog (the late three split it in two), the ended, the late and the batches
    assert len(inserts) < n // BACKLOG_RUN, len(inserts)
    expected = [
        (i, _ns(rec.scheduled[i]), _ns(rec.sent[i]), _ns(rec.dequeued[i]), _ns(rec.done[i]),
         int(rec.batch[i]) if i in served else -1, 0, int(rec.outcome[i]) if i in served else 3)
        for i in range(n)
    ]  # fmt: skip
    assert rows == expected
    with sqlite3.connect(tmp_path / "s.opscope") as conn:
        assert conn.execute("SELECT count(*) FROM batches").fetchone()[0] == 2
