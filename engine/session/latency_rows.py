"""A run's raw latency samples (`latency`, one row per sample, clustered by run), declared
once (engine/session/spec.py). The hot path both ways: rows are written by `executemany`
over zipped columns and read back as two int64 arrays, never row by row in Python."""

from __future__ import annotations

import sqlite3
from itertools import chain, repeat

import numpy as np

from engine.session import columns
from engine.session.spec import Column, RecordSpec

LATENCY: RecordSpec[dict[str, int]] = RecordSpec(
    "latency",
    (
        Column("run_id", int),
        Column("i", int),  # the sample's number in its run
        Column("start_ns", int),  # from the run's timing origin
        Column("latency_ns", int),
    ),
)


def add_latency(
    conn: sqlite3.Connection,
    run_id: int,
    first_index: int,
    starts_ns: np.ndarray,
    latencies_ns: np.ndarray,
) -> int:
    """Append raw samples numbered from `first_index`; returns the next index.

    The connection's own executemany over zipped `.tolist()` columns, not sqlite-utils'
    insert_all (dict rows: 2-3x slower, see bench/store_insert.py)."""
    n = int(latencies_ns.size)
    if n != starts_ns.size:
        raise ValueError(f"{starts_ns.size} starts for {n} latencies")
    rows = LATENCY.rows(
        run_id=repeat(run_id),
        i=range(first_index, first_index + n),
        start_ns=starts_ns.tolist(),
        latency_ns=latencies_ns.tolist(),
    )
    conn.executemany(LATENCY.insert(), rows)
    return first_index + n


def read_latency(conn: sqlite3.Connection, run_id: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts_ns, latencies_ns) as int64 arrays, in sample order, every value checked by
    one query at SQLite's speed."""
    names = ("start_ns", "latency_ns")
    columns.check_integers(conn, "latency", run_id, names)
    cur = conn.execute(LATENCY.select("WHERE run_id = ?", "ORDER BY i", names), [run_id])
    flat = np.fromiter(chain.from_iterable(cur), dtype=np.int64)
    pairs = flat.reshape(-1, 2)
    return pairs[:, 0].copy(), pairs[:, 1].copy()
