"""What a session's timeline holds beside the samples: markers and notes (`markers`, read
as `MarkerRow`) and telemetry (`telemetry`: GPU clock, memory, machine load), each
declared once (engine/session/spec.py)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from engine.session.spec import Column, RecordSpec
from engine.session.trust import req, typed


@dataclass(frozen=True, slots=True)
class MarkerRow:
    """A note on a session's timeline: a config change, a user note, an engine notice."""

    id: int
    run_id: int | None
    wall_ns: int  # epoch ns
    t_ns: int | None  # relative to the run's timing origin, when known
    kind: str  # "config", "note", "notice", ...
    label: str
    text: str


MARKERS: RecordSpec[MarkerRow] = RecordSpec(
    "markers",
    (
        Column("id", int),
        Column("run_id", int, nullable=True),
        Column("wall_ns", int),
        Column("t_ns", int, nullable=True),
        Column("kind", str),
        Column("label", str, nullable=True, default=""),
        Column("text", str, nullable=True, default=""),
    ),
    MarkerRow,
)

# One sample of one series (run_id NULL: between runs); read as arrays per series
TELEMETRY: RecordSpec[dict[str, object]] = RecordSpec(
    "telemetry",
    (
        Column("run_id", int, nullable=True),
        Column("wall_ns", int),
        Column("name", str),
        Column("value", float, nullable=True),
    ),
)


def read_markers(conn: sqlite3.Connection, run_id: int | None) -> list[MarkerRow]:
    """Markers and notes of one run, or of the whole session (run_id None)."""
    if run_id is None:
        return MARKERS.read_all(conn, order="ORDER BY wall_ns, id")
    return MARKERS.read_all(conn, "WHERE run_id = ?", "ORDER BY wall_ns, id", [run_id])


def add_marker(
    conn: sqlite3.Connection,
    run_id: int | None,
    kind: str,
    label: str,
    text: str,
    t_ns: int | None,
    wall_ns: int | None,
) -> int:
    """A marker (`wall_ns` None: now); returns its id."""
    wall = time.time_ns() if wall_ns is None else wall_ns
    return MARKERS.write(
        conn, run_id=run_id, wall_ns=wall, t_ns=t_ns, kind=kind, label=label, text=text
    )


def read_telemetry(
    conn: sqlite3.Connection, run_id: int | None
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """name -> (wall_ns int64, value float64) in time order."""
    out: dict[str, tuple[list[int], list[float]]] = {}
    sql = TELEMETRY.select(
        "WHERE run_id IS ?", "ORDER BY wall_ns, rowid", names=("name", "wall_ns", "value")
    )
    for name, wall_ns, value in conn.execute(sql, [run_id]):
        times, values = out.setdefault(req(name, str, "telemetry.name"), ([], []))
        times.append(req(wall_ns, int, "telemetry.wall_ns"))
        v = typed(value, float, "telemetry.value", nullable=True)
        values.append(float("nan") if v is None else v)
    return {
        k: (np.array(t, dtype=np.int64), np.array(v, dtype=np.float64)) for k, (t, v) in out.items()
    }


def add_telemetry(
    conn: sqlite3.Connection, rows: Iterable[tuple[int | None, int, str, float]]
) -> int:
    """Append (run_id, wall_ns, name, value) samples; returns how many."""
    data = [
        TELEMETRY.row(run_id=run_id, wall_ns=int(t), name=str(name), value=float(v))
        for run_id, t, name, v in rows
    ]
    conn.executemany(TELEMETRY.insert(), data)
    return len(data)
