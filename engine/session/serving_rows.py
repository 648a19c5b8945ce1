"""Reading a serving run back (kinds load and simulate): its set-up, its figures, and every
request and batch as `ServeRecords`, type-checked like every other value of a session."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.serve.records import OUTCOMES, ServeRecords
from engine.session import blobs, columns
from engine.session.trust import parse_json, req, typed


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


def read_serving(conn: sqlite3.Connection, run_id: int) -> ServingRun | None:
    """The serving run `run_id`, or None when the run is not one."""
    row = conn.execute(
        "SELECT simulated, traffic, batching, cache, warmup_s, origin_ns, calibration, "
        "summary, answers FROM serving WHERE run_id = ?",
        [run_id],
    ).fetchone()
    if row is None:
        return None
    return ServingRun(
        run_id=run_id,
        simulated=bool(req(row[0], int, "serving.simulated")),
        traffic=_setup(row[1], blobs.TRAFFIC, "serving.traffic") or {},
        batching=_setup(row[2], blobs.BATCHING, "serving.batching", nulls=False) or {},
        cache=_setup(row[3], blobs.CACHE, "serving.cache") or {},
        warmup_s=float(typed(row[4], float, "serving.warmup_s", nullable=True) or 0.0),
        origin_ns=typed(row[5], int, "serving.origin_ns", nullable=True),
        calibration=_setup(row[6], blobs.CALIBRATION, "serving.calibration"),
        summary=blobs.figures(parse_json(row[7], dict, "serving.summary")),
        answers=blobs.figures(parse_json(row[8], dict, "serving.answers")) or {},
        records=_records(conn, run_id),
    )


def _setup(
    text: object, spec: dict[str, blobs.Spec], what: str, nulls: bool = True
) -> dict[str, Any] | None:
    value = parse_json(text, dict, what)
    return None if value is None else blobs.checked(value, spec, what, nulls=nulls)


def _records(conn: sqlite3.Connection, run_id: int) -> ServeRecords:
    columns.check_integers(
        conn,
        "requests",
        run_id,
        required=("scheduled_ns", "batch", "hit", "outcome"),
        nullable=("sent_ns", "dequeued_ns", "done_ns"),
    )
    rows = conn.execute(
        "SELECT scheduled_ns, sent_ns, dequeued_ns, done_ns, batch, hit, outcome "
        "FROM requests WHERE run_id = ? ORDER BY i",
        [run_id],
    ).fetchall()
    cols = list(zip(*rows, strict=True)) if rows else [()] * 7
    rec = ServeRecords(
        scheduled=_seconds(cols[0]),
        sent=_seconds(cols[1]),
        dequeued=_seconds(cols[2]),
        done=_seconds(cols[3]),
        batch=np.array(cols[4], np.int64),
        hit=np.array(cols[5], np.int64).astype(bool),
        outcome=np.array(cols[6], np.int64),
    )
    if rec.outcome.size and (rec.outcome.min() < 0 or rec.outcome.max() >= len(OUTCOMES)):
        raise ValueError(
            "requests.outcome: an outcome that is not ok, rejected, timed out or unserved"
        )
    rec.outcome = rec.outcome.astype(np.int8)
    columns.check_integers(
        conn, "batches", run_id, required=("start_ns", "end_ns", "size", "instance")
    )
    brows = conn.execute(
        "SELECT start_ns, end_ns, size, instance FROM batches WHERE run_id = ? ORDER BY id",
        [run_id],
    ).fetchall()
    bcols = list(zip(*brows, strict=True)) if brows else [()] * 4
    rec.batch_start = _seconds(bcols[0])
    rec.batch_end = _seconds(bcols[1])
    rec.batch_size = np.array(bcols[2], np.int64)
    rec.batch_instance = np.array(bcols[3], np.int64)
    return rec


def _seconds(values: tuple[Any, ...]) -> np.ndarray:
    """ns integers (None: NaN) as float seconds."""
    return np.array(values, dtype=np.float64) / 1e9
