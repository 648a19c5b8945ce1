"""Reading a serving run back (kinds load and simulate): its set-up, its figures, and every
request and batch as `ServeRecords`, type-checked like every other value of a session."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np

from engine.events import ServedRequests, ServingStarted
from engine.serve.records import OUTCOMES, ServeRecords
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
    requests. Joins the caller's transaction."""
    c = chunk

    def ns(values: np.ndarray) -> list[int | None]:
        out = np.round(np.asarray(values, np.float64) * 1e9)
        return [None if v != v else int(v) for v in out.tolist()]

    def ints(values: np.ndarray) -> list[int]:
        return list(np.asarray(values, np.int64).tolist())

    requests = REQUESTS.rows(
        run_id=repeat(run_id),
        i=ints(c.index),
        scheduled_ns=ns(c.scheduled),
        sent_ns=ns(c.sent),
        dequeued_ns=ns(c.dequeued),
        done_ns=ns(c.done),
        batch=ints(c.batch),
        hit=ints(c.hit),
        outcome=ints(c.outcome),
    )
    batches = BATCHES.rows(
        run_id=repeat(run_id),
        id=ints(c.batch_id),
        start_ns=ns(c.batch_start),
        end_ns=ns(c.batch_end),
        size=ints(c.batch_size),
        instance=ints(c.batch_instance),
    )
    conn.executemany(REQUESTS.insert("INSERT OR REPLACE"), requests)
    conn.executemany(BATCHES.insert("INSERT OR REPLACE"), batches)
    return int(np.asarray(c.index).size)


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
