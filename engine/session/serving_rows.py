"""Reading a serving run back (kinds load and simulate): its set-up, its figures, and every
request and batch as `ServeRecords`, type-checked like every other value of a session."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np

from engine.events import ServedRequests, ServingStarted
from engine.serve.records import OUTCOMES, UNSERVED, ServeRecords
from engine.session import blobs, columns
from engine.session.spec import Column, RecordSpec
from engine.session.trust import json_text


@dataclass(frozen=True)
class ServingRun:
    run_id: int
    simulated: bool
    traffic: dict[str, Any]  # TrafficSpec.to_json() plus closed_loop, seed
    batching: dict[str, Any]  # BatchPolicy.to_json()
    cache: dict[str, Any]  # size, repeat
    warmup_s: float
    origin_ns: int | None  # wall clock ns of the schedule's start (a real run)
    calibration: dict[str, Any] | None  # ServiceModel.to_json() (a simulated run)
    summary: dict[str, Any] | None  # `opscope load --json`'s figures, once the run ended
    answers: dict[str, Any]  # simulate's max_rate, find, trials, curve when asked
    records: ServeRecords


def _setup_column(name: str, spec: dict[str, blobs.Spec], nulls: bool = True) -> Column:
    """A set-up column (JSON): its fields checked against `spec`."""
    what = f"serving.{name}"
    return Column(
        name, dict, then=lambda v: None if v is None else blobs.checked(v, spec, what, nulls=nulls)
    )


SERVING: RecordSpec[dict[str, Any]] = RecordSpec(
    "serving",
    (
        Column("run_id", int),
        Column("simulated", int, then=bool),
        _setup_column("traffic", blobs.TRAFFIC),
        _setup_column("batching", blobs.BATCHING, nulls=False),
        _setup_column("cache", blobs.CACHE),
        Column("warmup_s", float, nullable=True, default=0.0),
        Column("origin_ns", int, nullable=True),
        _setup_column("calibration", blobs.CALIBRATION),
        Column("summary", dict, then=blobs.figures),
        Column("answers", dict, then=lambda v: blobs.figures(v) or {}),
    ),
)
# One row per request (times: ns from the schedule's start; NULL where it has none)
REQUESTS: RecordSpec[dict[str, Any]] = RecordSpec(
    "requests",
    tuple(
        Column(n, int, nullable=n in ("sent_ns", "dequeued_ns", "done_ns"))
        for n in ("run_id", "i", "scheduled_ns", "sent_ns", "dequeued_ns", "done_ns", "batch",
                  "hit", "outcome")
    ),
)  # fmt: skip
# One row per batch run
BATCHES: RecordSpec[dict[str, Any]] = RecordSpec(
    "batches",
    tuple(Column(n, int) for n in ("run_id", "id", "start_ns", "end_ns", "size", "instance")),
)


def read_serving(conn: sqlite3.Connection, run_id: int) -> ServingRun | None:
    """The serving run `run_id`, or None when the run is not one."""
    row = conn.execute(SERVING.select("WHERE run_id = ?"), [run_id]).fetchone()
    if row is None:
        return None
    v = SERVING.values(row)
    for setup in ("traffic", "batching", "cache"):
        v[setup] = v[setup] or {}
    return ServingRun(**v, records=_records(conn, run_id))


def start_serving(conn: sqlite3.Connection, run_id: int, ev: ServingStarted) -> None:
    SERVING.upsert(
        conn,
        key=("run_id",),
        run_id=run_id,
        simulated=int(ev.simulated),
        traffic=json_text(ev.traffic),
        batching=json_text(ev.batching),
        cache=json_text(ev.cache),
        warmup_s=ev.warmup_s,
        calibration=json_text(ev.calibration) if ev.calibration else None,
    )


def set_serving_origin(conn: sqlite3.Connection, run_id: int, origin_wall_ns: int) -> None:
    SERVING.update(conn, {"run_id": run_id}, origin_ns=origin_wall_ns)


def set_serving_summary(
    conn: sqlite3.Connection, run_id: int, summary: dict[str, Any], answers: dict[str, Any]
) -> None:
    answers_text = json_text(answers) if answers else None
    SERVING.update(conn, {"run_id": run_id}, summary=json_text(summary), answers=answers_text)


def add_served(conn: sqlite3.Connection, run_id: int, chunk: ServedRequests) -> int:
    """Append a chunk of ended requests and the batches run since; returns the number of
    requests. Joins the caller's transaction. A backlog recorded as it arrives (requests
    waiting, sent at their scheduled times, one after another: a million due at once) is
    written a run of them per statement (`_backlog_runs`); a row at a time, a million
    took 30 s and the exit of an interrupted load waited on it."""
    c = chunk
    bulk, rest = _backlog_runs(conn, c)
    for first, scheduled_ns in bulk:
        conn.execute(_BACKLOG_INSERT, [run_id, first, scheduled_ns])
    requests = REQUESTS.rows(
        run_id=repeat(run_id),
        i=_ints(c.index[rest]),
        scheduled_ns=_ns(c.scheduled[rest]),
        sent_ns=_ns(c.sent[rest]),
        dequeued_ns=_ns(c.dequeued[rest]),
        done_ns=_ns(c.done[rest]),
        batch=_ints(c.batch[rest]),
        hit=_ints(c.hit[rest]),
        outcome=_ints(c.outcome[rest]),
    )
    batches = BATCHES.rows(
        run_id=repeat(run_id),
        id=_ints(c.batch_id),
        start_ns=_ns(c.batch_start),
        end_ns=_ns(c.batch_end),
        size=_ints(c.batch_size),
        instance=_ints(c.batch_instance),
    )
    conn.executemany(REQUESTS.insert("INSERT OR REPLACE"), requests)
    conn.executemany(BATCHES.insert("INSERT OR REPLACE"), batches)
    return int(np.asarray(c.index).size)


BACKLOG_RUN = 64  # waiting requests in a row that make one statement (fewer: row by row)
# a run of waiting requests numbered from ?2, sent at their scheduled times (?3: a JSON
# array of ns), parsed and inserted by SQLite itself: no Python per row
_BACKLOG_INSERT = (
    "INSERT OR REPLACE INTO requests (run_id, i, scheduled_ns, sent_ns, dequeued_ns, done_ns, "
    f"batch, hit, outcome) SELECT ?1, ?2 + key, value, value, NULL, NULL, -1, 0, {UNSERVED} "
    "FROM json_each(?3)"
)
_json_each: bool | None = None  # whether this SQLite has json_each (3.38 on: built in)


def _backlog_runs(
    conn: sqlite3.Connection, c: ServedRequests
) -> tuple[list[tuple[int, str]], np.ndarray]:
    """The chunk's waiting requests (no dequeue, no end, no batch, not a hit) sent at their
    scheduled times, in runs of BACKLOG_RUN or more consecutive numbers: each run's first
    number and its scheduled times (JSON); and the positions of every other row."""
    global _json_each
    idx = np.asarray(c.index, np.int64)
    scheduled = np.asarray(c.scheduled, np.float64)
    waiting = (
        (np.asarray(c.outcome) == UNSERVED)
        & (np.asarray(c.sent, np.float64) == scheduled)
        & np.isnan(np.asarray(c.dequeued, np.float64))
        & np.isnan(np.asarray(c.done, np.float64))
        & (np.asarray(c.batch) == -1)
        & ~np.asarray(c.hit, bool)
    )
    if np.count_nonzero(waiting) < BACKLOG_RUN:
        return [], np.arange(idx.size)
    if _json_each is None:
        try:
            conn.execute("SELECT count(*) FROM json_each('[1]')").fetchone()
            _json_each = True
        except sqlite3.OperationalError:  # an SQLite without JSON: row by row
            _json_each = False
    if not _json_each:
        return [], np.arange(idx.size)
    # runs: a break wherever a row is not waiting or does not follow the last number
    breaks = np.flatnonzero(~waiting[1:] | ~waiting[:-1] | (np.diff(idx) != 1)) + 1
    bounds = np.concatenate([[0], breaks, [idx.size]])
    taken = np.zeros(idx.size, bool)
    bulk: list[tuple[int, str]] = []
    ns = np.round(scheduled * 1e9)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        if b - a >= BACKLOG_RUN and waiting[a]:
            bulk.append(
                (int(idx[a]), "[" + ",".join(map(str, ns[a:b].astype(np.int64).tolist())) + "]")
            )
            taken[a:b] = True
    return bulk, np.flatnonzero(~taken)


def _ns(values: np.ndarray) -> list[int | None]:
    """Seconds as ns integers; NaN as NULL."""
    out = np.round(np.asarray(values, np.float64) * 1e9)
    nan = np.isnan(out)
    if not nan.any():
        return list(out.astype(np.int64).tolist())
    mixed = out.astype(object)
    mixed[~nan] = out[~nan].astype(np.int64).tolist()
    mixed[nan] = None
    return list(mixed.tolist())


def _ints(values: np.ndarray) -> list[int]:
    return list(np.asarray(values, np.int64).tolist())


def _records(conn: sqlite3.Connection, run_id: int) -> ServeRecords:
    columns.check_integers(
        conn,
        "requests",
        run_id,
        required=("scheduled_ns", "batch", "hit", "outcome"),
        nullable=("sent_ns", "dequeued_ns", "done_ns"),
    )
    names = ("scheduled_ns", "sent_ns", "dequeued_ns", "done_ns", "batch", "hit", "outcome")
    sql = REQUESTS.select("WHERE run_id = ?", "ORDER BY i", names)
    c = _columns(conn.execute(sql, [run_id]).fetchall(), names)
    rec = ServeRecords(
        scheduled=_seconds(c["scheduled_ns"]),
        sent=_seconds(c["sent_ns"]),
        dequeued=_seconds(c["dequeued_ns"]),
        done=_seconds(c["done_ns"]),
        batch=np.array(c["batch"], np.int64),
        hit=np.array(c["hit"], np.int64).astype(bool),
        outcome=np.array(c["outcome"], np.int64),
    )
    if rec.outcome.size and (rec.outcome.min() < 0 or rec.outcome.max() >= len(OUTCOMES)):
        raise ValueError(
            "requests.outcome: an outcome that is not ok, rejected, timed out or unserved"
        )
    rec.outcome = rec.outcome.astype(np.int8)
    columns.check_integers(
        conn, "batches", run_id, required=("start_ns", "end_ns", "size", "instance")
    )
    bnames = ("start_ns", "end_ns", "size", "instance")
    sql = BATCHES.select("WHERE run_id = ?", "ORDER BY id", bnames)
    b = _columns(conn.execute(sql, [run_id]).fetchall(), bnames)
    rec.batch_start = _seconds(b["start_ns"])
    rec.batch_end = _seconds(b["end_ns"])
    rec.batch_size = np.array(b["size"], np.int64)
    rec.batch_instance = np.array(b["instance"], np.int64)
    return rec


def _columns(rows: list[Any], names: tuple[str, ...]) -> dict[str, tuple[Any, ...]]:
    """Rows of the columns `names` (already checked in SQL) as whole columns, by name."""
    cols = list(zip(*rows, strict=True)) if rows else [()] * len(names)
    return dict(zip(names, cols, strict=True))


def _seconds(values: tuple[Any, ...]) -> np.ndarray:
    """ns integers (None: NaN) as float seconds."""
    return np.array(values, dtype=np.float64) / 1e9
