"""Every column a reader of a session file uses, in one place: its SQL type, its bounds,
the longest text it may hold, and whether a file must have it.

A session file may come from anyone, so nothing read from it is trusted. This table is
what the checks apply:

* on open (`check_columns`), a file lacking a *required* column is refused in one line
  naming the table and column; a missing *optional* column reads as NULL (a temporary view
  over the table adds it, in this connection only: the file is never written), so a
  renderer shows "-" for it;
* every value read (`bounded`, called by `trust.typed`, `trust.req` and `trust.parse_json`
  for the column they name) must lie within its bounds: an out-of-bounds value of a column
  the reader can do without reads as missing (None), and one it needs is a one-line error;
  text and JSON longer than the column's limit are treated the same way, before any
  parsing, so a 5 MB field never becomes gigabytes of objects.

JSON fields inside the blobs (serving set-ups, summaries) are checked by
`engine/analysis/json_fields.py`, which uses the same number bounds.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from engine.errors import SessionFileError

INT64 = 2**63 - 1
NS = float(INT64)  # nanosecond stamps: any non-negative int64
COUNT = 1e12  # counts of samples, requests, nodes, calls
BYTES = 1e15
MS = 1e9  # milliseconds (about 11 days)
SECONDS = 1e7  # seconds (about 4 months)
MAX_BATCH = 1_000_000  # a batch size, a serving max batch
KB = 1024
MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Col:
    """One column: SQL type, whether a file must have it, bounds, longest text."""

    kind: type  # int | float | str (a JSON column is str)
    required: bool = False
    lo: float = -math.inf
    hi: float = math.inf
    chars: int = 4 * KB  # text and JSON only
    since: int = 1  # the format version that added it to its table (a migration's ALTER)


def _text(chars: int = 4 * KB, required: bool = False) -> Col:
    return Col(str, required, chars=chars)


def _int(lo: float = 0, hi: float = COUNT, required: bool = False) -> Col:
    return Col(int, required, lo, hi)


def _real(lo: float = 0.0, hi: float = MS, required: bool = False) -> Col:
    return Col(float, required, lo, hi)


def _req(col: Col) -> Col:
    return Col(col.kind, True, col.lo, col.hi, col.chars)


def _since(version: int, col: Col) -> Col:
    """A column format `version` added to its table (schema.py's `_v8_contention`,
    `_v9_origin`)."""
    return Col(col.kind, col.required, col.lo, col.hi, col.chars, since=version)


def _v8(col: Col) -> Col:
    return _since(8, col)


_MS_STATS = ("mean_ms", "std_ms", "min_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms")
_MS_REQUIRED = ("p50_ms", "p99_ms")

COLUMNS: dict[str, dict[str, Col]] = {
    "meta": {"key": _text(required=True), "value": _text(64 * KB, required=True)},
    "models": {
        "sha256": _text(128, required=True),
        "name": _text(1 * KB, required=True),
        "path": _text(8 * KB, required=True),
        "file_bytes": _int(0, BYTES, required=True),
        "inputs": _text(1 * MB, required=True),
        "outputs": _text(1 * MB, required=True),
        "info": _text(4 * MB, required=True),
        "first_seen": _text(64),
    },
    "runs": {
        "id": _int(0, INT64, required=True),
        "kind": _text(32, required=True),
        "model_sha256": _text(128, required=True),
        "model_path": _text(8 * KB, required=True),
        "config": _text(64 * KB, required=True),
        "provider_requested": _text(256),
        "provider_used": _text(256, required=True),
        "providers": _text(16 * KB),
        "inputs": _text(1 * MB),
        "batch": _int(1, MAX_BATCH),
        "session_create_s": _real(0.0, SECONDS),
        "variant": _text(1 * MB, required=True),
        "status": _text(32, required=True),
        "error": _text(64 * KB, required=True),
        "started_at": _text(64, required=True),
        "ended_at": _text(64, required=True),
        "timing_origin_ns": _int(0, NS),
        "host": _text(1 * KB),
        "app_version": _text(256),
        "samples": _int(0, COUNT, required=True),
        **{name: _real(0.0, MS, required=name in _MS_REQUIRED) for name in _MS_STATS},
        "inferences_per_s": _real(0.0, 1e12),
        "samples_per_s": _real(0.0, 1e12, required=True),
        "stable": _int(0, 1),
        "warmup_runs": _int(0, COUNT),
        "elapsed_s": _real(0.0, SECONDS),
        "accuracy": _text(4 * MB, required=True),
        "contention": _v8(_text(64 * KB)),
        **{n: _v8(_real(0.0, MS)) for n in ("p50_lo_ms", "p50_hi_ms", "p99_lo_ms", "p99_hi_ms")},
        "origin": _since(9, _text(1 * KB)),
    },
    "latency": {
        "run_id": _int(0, INT64, required=True),
        "i": _int(0, INT64, required=True),
        "start_ns": _int(-NS, NS, required=True),
        "latency_ns": _int(0, NS, required=True),
    },
    "profiles": {
        "run_id": _int(0, INT64, required=True),
        "pass": _int(-1, COUNT, required=True),
        "runs": _int(0, COUNT, required=True),
        "coverage": _real(0.0, 1e3, required=True),
        "overhead": _real(-1e6, 1e6, required=True),
        "provider_nodes": _text(64 * KB, required=True),
        "nodes_total": _int(0, COUNT),
        "recorded_at": _text(64),
        "contention": _v8(_text(64 * KB)),
    },
    "profile_runs": {
        "run_id": _int(0, INT64, required=True),
        "pass": _int(-1, COUNT, required=True),
        "run_index": _int(0, COUNT, required=True),
        "start_us": _real(-1e15, 1e15, required=True),
        "dur_us": _real(0.0, 1e15, required=True),
    },
    "ops": {
        "run_id": _int(0, INT64, required=True),
        "pass": _int(-1, COUNT, required=True),
        "kind": _text(16, required=True),
        "rank": _int(0, COUNT, required=True),
        "name": _text(4 * KB, required=True),
        "op_type": _text(1 * KB, required=True),
        "provider": _text(256),
        "calls": _int(0, COUNT),
        "time_ms": _real(0.0, MS, required=True),
        "p50_ms": _real(0.0, MS),
        "p99_ms": _real(0.0, MS),
        "share": _real(0.0, 1e3),
        "bytes": _int(0, BYTES),
        "gbps": _real(0.0, 1e9),
        "flops": _int(0, 1e21),
        "gflops": _real(0.0, 1e12),
        "intensity": _real(0.0, 1e12),
    },
    "op_nodes": {
        "run_id": _int(0, INT64, required=True),
        "id": _int(0, COUNT, required=True),
        "name": _text(4 * KB, required=True),
        "parent": _text(4 * KB, required=True),
        "op_type": _text(1 * KB, required=True),
        "provider": _text(256, required=True),
        "node_index": _int(-1, COUNT, required=True),
        "activation_bytes": _int(0, BYTES, required=True),
        "parameter_bytes": _int(0, BYTES, required=True),
        "output_bytes": _int(0, BYTES, required=True),
        "input_shapes": _text(64 * KB, required=True),
        "output_shapes": _text(64 * KB, required=True),
    },
    "op_times": {
        "run_id": _int(0, INT64, required=True),
        "pass": _int(-1, COUNT, required=True),
        "seq": _int(0, COUNT, required=True),
        "run_index": _int(0, COUNT, required=True),
        "node": _int(0, COUNT, required=True),
        "start_us": _real(-1e15, 1e15, required=True),
        "dur_us": _real(0.0, 1e15, required=True),
        "self_us": _real(0.0, 1e15, required=True),
    },
    "telemetry": {
        "run_id": _int(0, INT64, required=True),
        "wall_ns": _int(0, NS, required=True),
        "name": _text(256, required=True),
        "value": _real(-1e18, 1e18, required=True),
    },
    "markers": {
        "id": _int(0, INT64, required=True),
        "run_id": _int(0, INT64, required=True),
        "wall_ns": _int(0, NS, required=True),
        "t_ns": _int(-NS, NS, required=True),
        "kind": _text(64, required=True),
        "label": _text(4 * KB, required=True),
        "text": _text(64 * KB, required=True),
    },
    "serving": {
        "run_id": _int(0, INT64, required=True),
        "simulated": _int(0, 1, required=True),
        "traffic": _text(64 * KB, required=True),
        "batching": _text(16 * KB, required=True),
        "cache": _text(16 * KB, required=True),
        "warmup_s": _real(0.0, SECONDS, required=True),
        "origin_ns": _int(0, NS),
        "calibration": _text(16 * MB),
        "summary": _text(1 * MB),
        "answers": _text(4 * MB),
    },
    "requests": {
        "run_id": _int(0, INT64, required=True),
        "i": _int(0, INT64, required=True),
        "scheduled_ns": _int(-NS, NS, required=True),
        "sent_ns": _int(-NS, NS, required=True),
        "dequeued_ns": _int(-NS, NS, required=True),
        "done_ns": _int(-NS, NS, required=True),
        "batch": _int(-1, COUNT, required=True),
        "hit": _int(0, 1, required=True),
        "outcome": _int(0, 16, required=True),
    },
    "batches": {
        "run_id": _int(0, INT64, required=True),
        "id": _int(0, INT64, required=True),
        "start_ns": _int(-NS, NS, required=True),
        "end_ns": _int(-NS, NS, required=True),
        "size": _int(1, MAX_BATCH, required=True),
        "instance": _int(0, 4096, required=True),
    },
    "memory": {
        "id": _int(0, INT64, required=True),
        "created_at": _text(64, required=True),
        "model_path": _text(8 * KB, required=True),
        "config": _text(64 * KB, required=True),
        "report": _text(8 * MB, required=True),
    },
    "llm_studies": {
        "id": _int(0, INT64, required=True),
        "created_at": _text(64, required=True),
        "model_path": _text(8 * KB, required=True),
        "kind": _text(32, required=True),
        "config": _text(64 * KB, required=True),
        "plan": _text(64 * KB, required=True),
        "rows": _text(8 * MB, required=True),
        "status": _text(32, required=True),
    },
    "sweeps": {
        "id": _int(0, INT64, required=True),
        "created_at": _text(64, required=True),
        "model_path": _text(8 * KB, required=True),
        "dim": _text(1 * KB, required=True),
        "config": _text(64 * KB, required=True),
        "result": _text(8 * MB, required=True),
        "run_ids": _text(1 * MB, required=True),
        "status": _text(32, required=True),
    },
    "generation": {
        "run_id": _int(0, INT64, required=True),
        "prompt_len": _int(0, 1e9, required=True),
        "new_tokens": _int(0, 1e9, required=True),
        "batch": _int(1, MAX_BATCH, required=True),
        "sampling": _text(4 * KB, required=True),
        "context_length": _int(0, 1e9, required=True),
        "kv_bytes_per_token": _int(0, BYTES, required=True),
        "summary": _text(1 * MB, required=True),
    },
    "steps": {
        "run_id": _int(0, INT64, required=True),
        "generation": _int(0, COUNT, required=True),
        "step": _int(0, COUNT, required=True),
        "start_ns": _int(-NS, NS, required=True),
        "dur_ns": _int(0, NS, required=True),
    },
}
# values the readers compute from the stored rows, named as they are in errors
DERIVED: dict[str, Col] = {
    "op_events.run_index": COLUMNS["op_times"]["run_index"],
    "op_events.node_index": COLUMNS["op_nodes"]["node_index"],
    "op_events.bytes": _int(0, BYTES),
    "op_events.activation_bytes": COLUMNS["op_nodes"]["activation_bytes"],
    "op_events.parameter_bytes": COLUMNS["op_nodes"]["parameter_bytes"],
    "op_events.output_bytes": COLUMNS["op_nodes"]["output_bytes"],
    "op_events.start_us": COLUMNS["op_times"]["start_us"],
    "op_events.dur_us": COLUMNS["op_times"]["dur_us"],
    "op_events.self_us": COLUMNS["op_times"]["self_us"],
    "op_events.name": COLUMNS["op_nodes"]["name"],
    "op_events.op_type": COLUMNS["op_nodes"]["op_type"],
    "op_events.provider": COLUMNS["op_nodes"]["provider"],
    "op_events.parent": COLUMNS["op_nodes"]["parent"],
    "op_events.input_shapes": COLUMNS["op_nodes"]["input_shapes"],
    "op_events.output_shapes": COLUMNS["op_nodes"]["output_shapes"],
    "start_us": COLUMNS["profile_runs"]["start_us"],
    "dur_us": COLUMNS["profile_runs"]["dur_us"],
    "meta.value": COLUMNS["meta"]["value"],
}

REQUIRED: dict[str, tuple[str, ...]] = {
    table: tuple(name for name, col in cols.items() if col.required)
    for table, cols in COLUMNS.items()
}


def column(what: str) -> Col | None:
    """The declaration of `table.column` (or a derived value's name); None if undeclared."""
    table, _, name = what.partition(".")
    cols = COLUMNS.get(table)
    if cols is not None and name in cols:
        return cols[name]
    return DERIVED.get(what)


def unreadable(table: str, name: str) -> str:
    return f"not an OpScope session this version can read ({table} table lacks column {name})"


@dataclass(frozen=True, slots=True)
class ColumnInfo:
    """A column as SQLite's `PRAGMA table_info` describes it."""

    name: str
    type: str
    pk: int  # its place in the primary key (0: not in it)


def table_info(conn: sqlite3.Connection, table: str, schema: str = "") -> list[ColumnInfo]:
    """The columns a file's `table` has (in `schema`: "main", an attached one; default:
    as the connection resolves the name, TEMP views first)."""
    prefix = f"{schema}." if schema else ""
    return [
        ColumnInfo(name, kind, pk)
        for _cid, name, kind, _notnull, _default, pk in conn.execute(
            f"PRAGMA {prefix}table_info({table})"
        )
    ]


def missing_columns(conn: sqlite3.Connection) -> dict[str, list[str]]:
    """table -> declared columns the file's table lacks (tables it lacks: every column)."""
    out: dict[str, list[str]] = {}
    for table, cols in COLUMNS.items():
        have = {info.name for info in table_info(conn, table)}
        lacking = [c for c in cols if c not in have]
        if lacking:
            out[table] = lacking
    return out


def check_columns(path: Path, conn: sqlite3.Connection) -> dict[str, list[str]]:
    """Refuse a file lacking a table or a required column (one line naming both); give a
    missing optional column a NULL stand-in for this connection (a TEMP view, so the file
    is not written). Returns the optional columns the file lacks, by table."""
    kinds = dict(conn.execute("SELECT name, type FROM sqlite_master"))
    for table in COLUMNS:
        if kinds.get(table) != "table":
            raise SessionFileError(f"not an OpScope session (no {table} table)", path)
    lacking = missing_columns(conn)
    for table, cols in lacking.items():
        needed = [c for c in cols if COLUMNS[table][c].required]
        if needed:
            raise SessionFileError(unreadable(table, needed[0]), path)
    for table, cols in lacking.items():
        conn.execute("PRAGMA temp_store = MEMORY")  # no temp file anywhere
        extra = ", ".join(f"NULL AS {c}" for c in cols)
        conn.execute(f"CREATE TEMP VIEW {table} AS SELECT *, {extra} FROM main.{table}")
    return lacking


def lacking_note(lacking: dict[str, list[str]]) -> str | None:
    """One line saying which optional columns a file lacks (None: it has them all)."""
    names = [f"{table}.{c}" for table, cols in lacking.items() for c in cols]
    if not names:
        return None
    more = f" and {len(names) - 6} more" if len(names) > 6 else ""
    return (
        f"lacks column{'s' if len(names) > 1 else ''} {', '.join(names[:6])}{more} "
        "(written by another version, or edited): those figures show as -"
    )


def bounded(value: object, what: str, nullable: bool) -> object:
    """`value` (already of its SQL type) checked against the declaration of `what`:
    out of bounds or too long reads as None where the caller can do without it
    (`nullable`), and is a ValueError naming the column where it cannot."""
    col = column(what)
    if col is None or value is None:
        return value
    if isinstance(value, str):
        if len(value) <= col.chars:
            return value
        why = f"{what} holds {len(value):,} characters (at most {col.chars:,})"
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if (isinstance(value, int) or math.isfinite(value)) and col.lo <= value <= col.hi:
            return value
        why = f"{what} is out of range ({value:.6g}; {col.lo:.6g} to {col.hi:.6g})"
    else:
        return value
    if nullable:
        return None
    raise ValueError(why)


def sql_violations(table: str, name: str, nullable: bool = False) -> str:
    """An SQL condition true for a row whose `name` is not an integer within its declared
    bounds (NULL passes when `nullable`): bulk rows are checked at SQLite's speed."""
    col = COLUMNS[table][name]
    lo, hi = int(max(col.lo, -INT64)), int(min(col.hi, INT64))
    typed = "('integer', 'null')" if nullable else "('integer')"
    return f"(typeof({name}) NOT IN {typed} OR {name} < {lo} OR {name} > {hi})"


def check_integers(
    conn: sqlite3.Connection,
    table: str,
    run_id: int,
    required: tuple[str, ...],
    nullable: tuple[str, ...] = (),
) -> None:
    """Every value of the run's rows in `table` is an integer within its declared bounds
    (NULL where allowed), else a ValueError naming the column: one query, so a million
    rows are checked at SQLite's speed rather than value by value in Python (and a 1.5
    is refused, not truncated to 1 by numpy)."""
    bad = [sql_violations(table, c) for c in required] + [
        sql_violations(table, c, nullable=True) for c in nullable
    ]
    row = conn.execute(
        f"SELECT {', '.join(f'SUM({b})' for b in bad)} FROM {table} WHERE run_id = ?", [run_id]
    ).fetchone()
    for column, count in zip(required + nullable, row, strict=True):
        if count:
            raise ValueError(
                f"{table}.{column} is not a number within its bounds in {count} row(s)"
            )
