"""The session file's schema: a version number and the ordered migrations that build it.

`MIGRATIONS[i]` turns a version-`i` file into version `i + 1` (version 0 is an empty
database). A file's version lives in `meta.schema_version`; `migrate` applies what is
missing, each step in its own transaction, so a file is always at exactly one version.
Never edit a released migration: append a new one. docs/session-format.md describes every
table for the tools that read these files.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

from sqlite_utils import Database

from engine.errors import SessionFileError

FORMAT_NAME = "opscope-session"
APPLICATION_ID = 0x4F505343  # "OPSC" in the SQLite header, so `file` can tell what this is

Migration = Callable[[Database], None]


def _v1_initial(db: Database) -> None:
    """Version 1: every table, with the indexes that keep per-run reads fast."""
    db.table("meta").create({"key": str, "value": str}, pk="key")
    db.table("models").create(
        {
            "sha256": str,
            "name": str,
            "path": str,
            "file_bytes": int,
            "inputs": str,
            "outputs": str,
            "info": str,
            "first_seen": str,
        },
        pk="sha256",
    )
    db.table("runs").create(
        {
            "id": int,
            "kind": str,
            "model_sha256": str,
            "model_path": str,
            "config": str,
            "provider_requested": str,
            "provider_used": str,
            "providers": str,
            "inputs": str,
            "batch": int,
            "session_create_s": float,
            "variant": str,
            "status": str,
            "error": str,
            "started_at": str,
            "ended_at": str,
            "timing_origin_ns": int,
            "host": str,
            "app_version": str,
            "samples": int,
            "mean_ms": float,
            "std_ms": float,
            "min_ms": float,
            "p50_ms": float,
            "p90_ms": float,
            "p95_ms": float,
            "p99_ms": float,
            "max_ms": float,
            "inferences_per_s": float,
            "samples_per_s": float,
            "stable": int,
            "warmup_runs": int,
            "elapsed_s": float,
            "accuracy": str,
        },
        pk="id",
        not_null=["status", "samples"],
        defaults={"samples": 0},
        foreign_keys=[("model_sha256", "models", "sha256")],
    )
    # Clustered by run: the primary key (run_id, i) is the per-run index, with no second
    # b-tree to update on every insert (a separate index on run_id costs ~1.8x insert time).
    db.execute(
        "CREATE TABLE latency (run_id INTEGER NOT NULL REFERENCES runs(id), "
        "i INTEGER NOT NULL, start_ns INTEGER NOT NULL, latency_ns INTEGER NOT NULL, "
        "PRIMARY KEY (run_id, i)) WITHOUT ROWID"
    )
    db.table("profiles").create(
        {
            "run_id": int,
            "pass": int,
            "runs": int,
            "coverage": float,
            "overhead": float,
            "provider_nodes": str,
            "nodes_total": int,
            "recorded_at": str,
        },
        pk=("run_id", "pass"),
        foreign_keys=[("run_id", "runs", "id")],
    )
    db.table("profile_runs").create(
        {"run_id": int, "pass": int, "run_index": int, "start_us": float, "dur_us": float},
        pk=("run_id", "pass", "run_index"),
        foreign_keys=[("run_id", "runs", "id")],
    )
    db.table("ops").create(
        {
            "run_id": int,
            "pass": int,
            "kind": str,
            "rank": int,
            "name": str,
            "op_type": str,
            "provider": str,
            "calls": int,
            "time_ms": float,
            "p50_ms": float,
            "p99_ms": float,
            "share": float,
            "bytes": int,
            "gbps": float,
            "flops": int,
            "gflops": float,
            "intensity": float,
        },
        not_null=["run_id", "pass", "kind", "rank"],
        foreign_keys=[("run_id", "runs", "id")],
    )
    db.table("op_events").create(
        {
            "run_id": int,
            "pass": int,
            "run_index": int,
            "name": str,
            "parent": str,
            "op_type": str,
            "provider": str,
            "node_index": int,
            "start_us": float,
            "dur_us": float,
            "self_us": float,
            "bytes": int,
            "activation_bytes": int,
            "parameter_bytes": int,
            "output_bytes": int,
            "input_shapes": str,
            "output_shapes": str,
        },
        not_null=["run_id", "pass", "run_index"],
        foreign_keys=[("run_id", "runs", "id")],
    )
    db.table("telemetry").create(
        {"run_id": int, "wall_ns": int, "name": str, "value": float},
        not_null=["wall_ns", "name"],
        foreign_keys=[("run_id", "runs", "id")],
    )
    db.table("markers").create(
        {
            "id": int,
            "run_id": int,
            "wall_ns": int,
            "t_ns": int,
            "kind": str,
            "label": str,
            "text": str,
        },
        pk="id",
        not_null=["wall_ns", "kind"],
        foreign_keys=[("run_id", "runs", "id")],
    )
    for table in ("ops", "op_events", "telemetry", "markers"):
        db.table(table).create_index(["run_id"], index_name=f"idx_{table}_run_id")
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")


def _v2_serving(db: Database) -> None:
    """Version 2: serving runs (kinds load and simulate). `serving` holds a run's traffic,
    batching and cache (JSON), its figures and the calibration a simulated run drew from;
    `requests` one row per request, `batches` one per batch run. Times are ns from the
    schedule's start; NULL where a request has none. Queue depth over time is exact from
    `requests` (+1 at sent_ns, -1 at dequeued_ns), so it is not stored twice."""
    db.table("serving").create(
        {
            "run_id": int,
            "simulated": int,
            "traffic": str,
            "batching": str,
            "cache": str,
            "warmup_s": float,
            "origin_ns": int,
            "calibration": str,
            "summary": str,
            "answers": str,
        },
        pk="run_id",
        foreign_keys=[("run_id", "runs", "id")],
    )
    db.execute(
        "CREATE TABLE requests (run_id INTEGER NOT NULL REFERENCES runs(id), "
        "i INTEGER NOT NULL, scheduled_ns INTEGER NOT NULL, sent_ns INTEGER, "
        "dequeued_ns INTEGER, done_ns INTEGER, batch INTEGER NOT NULL, hit INTEGER NOT NULL, "
        "outcome INTEGER NOT NULL, PRIMARY KEY (run_id, i)) WITHOUT ROWID"
    )
    db.execute(
        "CREATE TABLE batches (run_id INTEGER NOT NULL REFERENCES runs(id), "
        "id INTEGER NOT NULL, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, "
        "size INTEGER NOT NULL, instance INTEGER NOT NULL, PRIMARY KEY (run_id, id)) "
        "WITHOUT ROWID"
    )


def _v3_sweeps(db: Database) -> None:
    """Version 3: sweeps (`opscope sweep --session`), one row per sweep: the model, the
    dim varied, the run config (JSON), the result (`SweepResult.to_json()`: vary, points,
    growth), the ids of the runs its points recorded (JSON list) and whether it finished
    ("complete") or was interrupted ("partial": the points done, fitted when two or more)."""
    db.table("sweeps").create(
        {
            "id": int,
            "created_at": str,
            "model_path": str,
            "dim": str,
            "config": str,
            "result": str,
            "run_ids": str,
            "status": str,
        },
        pk="id",
        not_null=["dim", "result", "status"],
    )


def _v4_generation(db: Database) -> None:
    """Version 4: generation runs (`opscope generate --session`, kind `generate`). The
    `generation` row holds the run's shape and figures (JSON); `steps` one row per pass of
    each timed generation: step 0 the time to the first token (the prefill), then each
    decode step (ns; a generation's start is ns from the run's timing origin). A run's
    `latency` rows are its whole generations (end to end)."""
    db.table("generation").create(
        {
            "run_id": int,
            "prompt_len": int,
            "new_tokens": int,
            "batch": int,
            "sampling": str,
            "context_length": int,
            "kv_bytes_per_token": int,
            "summary": str,
        },
        pk="run_id",
        foreign_keys=[("run_id", "runs", "id")],
    )
    db.execute(
        "CREATE TABLE steps (run_id INTEGER NOT NULL REFERENCES runs(id), "
        "generation INTEGER NOT NULL, step INTEGER NOT NULL, start_ns INTEGER, "
        "dur_ns INTEGER NOT NULL, PRIMARY KEY (run_id, generation, step)) WITHOUT ROWID"
    )


OP_NODE_COLUMNS = (
    "name",
    "parent",
    "op_type",
    "provider",
    "node_index",
    "activation_bytes",
    "parameter_bytes",
    "output_bytes",
    "input_shapes",
    "output_shapes",
)


def _v5_compact_op_events(db: Database) -> None:
    """Version 5: a profiling pass's per-inference node rows, compact. What a node is
    (name, op type, provider, bytes, shapes: the same in every inference) is written once per
    run in `op_nodes`; each execution is a row of numbers in `op_times` (~22 bytes instead of
    ~160), so an hour of live profiling of a 300-node model takes ~16 MB, not ~120 MB.
    `op_events` becomes a view with its old columns, for tools that query it. Rows are
    moved in trace order; a node's id is its order of first appearance in the run."""
    db.execute(
        "CREATE TABLE op_nodes (run_id INTEGER NOT NULL REFERENCES runs(id), "
        "id INTEGER NOT NULL, name TEXT NOT NULL, parent TEXT NOT NULL, op_type TEXT NOT NULL, "
        "provider TEXT NOT NULL, node_index INTEGER NOT NULL, "
        "activation_bytes INTEGER NOT NULL, parameter_bytes INTEGER NOT NULL, "
        "output_bytes INTEGER NOT NULL, input_shapes TEXT NOT NULL, "
        "output_shapes TEXT NOT NULL, PRIMARY KEY (run_id, id)) WITHOUT ROWID"
    )
    db.execute(
        "CREATE TABLE op_times (run_id INTEGER NOT NULL REFERENCES runs(id), "
        "pass INTEGER NOT NULL, seq INTEGER NOT NULL, run_index INTEGER NOT NULL, "
        "node INTEGER NOT NULL, start_us REAL NOT NULL, dur_us REAL NOT NULL, self_us REAL, "
        "PRIMARY KEY (run_id, pass, seq)) WITHOUT ROWID"
    )
    conn = db.conn
    ids: dict[tuple[object, ...], int] = {}
    counts: dict[int, int] = {}
    seqs: dict[tuple[int, int], int] = {}
    nodes: list[tuple[object, ...]] = []
    times: list[tuple[object, ...]] = []
    cols = ", ".join(OP_NODE_COLUMNS)
    rows = conn.execute(
        f"SELECT run_id, pass, run_index, start_us, dur_us, self_us, {cols} FROM op_events "
        "ORDER BY rowid"
    )
    for run_id, pass_, run_index, start, dur, self_us, *fields in rows:
        fields[1] = fields[1] or ""  # parent: "" at top level
        fields[4] = -1 if fields[4] is None else fields[4]  # node_index
        for k in (5, 6, 7):  # bytes
            fields[k] = fields[k] or 0
        for k in (8, 9):  # shapes
            fields[k] = fields[k] or "[]"
        key = (run_id, *fields)
        node = ids.get(key)
        if node is None:
            node = ids[key] = counts.get(run_id, 0)
            counts[run_id] = node + 1
            nodes.append((run_id, node, *fields))
        seq = seqs.get((run_id, pass_), 0)
        seqs[(run_id, pass_)] = seq + 1
        times.append(
            (run_id, pass_, seq, run_index, node, start, dur, None if self_us == dur else self_us)
        )
        if len(times) >= 100_000:  # a 76 MB file holds ~10^6 rows: bounded memory
            _insert_op_times(conn, times)
    conn.executemany(
        f"INSERT INTO op_nodes (run_id, id, {cols}) VALUES ({', '.join('?' * 12)})", nodes
    )
    _insert_op_times(conn, times)
    db.execute("DROP INDEX IF EXISTS idx_op_events_run_id")
    db.execute("DROP TABLE op_events")
    db.execute(
        "CREATE VIEW op_events AS SELECT t.run_id, t.pass, t.run_index, n.name, n.parent, "
        "n.op_type, n.provider, n.node_index, t.start_us, t.dur_us, "
        "COALESCE(t.self_us, t.dur_us) AS self_us, "
        "n.activation_bytes + n.parameter_bytes + n.output_bytes AS bytes, "
        "n.activation_bytes, n.parameter_bytes, n.output_bytes, n.input_shapes, "
        "n.output_shapes, t.seq FROM op_times t JOIN op_nodes n "
        "ON n.run_id = t.run_id AND n.id = t.node"
    )


def _v6_memory(db: Database) -> None:
    """Version 6: memory reports (`opscope memory --session`, the window's Memory dock), one
    row each: the model, the run config (JSON) and the report (engine/run/memory_job.py's
    result, JSON: weights by dtype, the activation liveness as loaded and as run, resident
    memory measured, the load broken down)."""
    db.table("memory").create(
        {"id": int, "created_at": str, "model_path": str, "config": str, "report": str},
        pk="id",
        not_null=["report"],
    )


def _v7_llm_studies(db: Database) -> None:
    """Version 7: LLM serving studies (`opscope simulate --llm --session`, `load --llm
    --session`, the window's LLM Serving dock), one row each: the model, kind ("simulate":
    every layout simulated; "real": one layout served for real, with the simulator's answer
    for the same requests), the run config and the plan (JSON: traffic, lengths, layout,
    prefix cache, SLOs), the summary rows (JSON list, engine/serve/llm/metrics.py's dicts
    with `layout`, `layout_config`, `simulated`; with a prefix cache, the same requests
    without it) and whether it finished ("complete") or was interrupted ("partial")."""
    db.table("llm_studies").create(
        {
            "id": int,
            "created_at": str,
            "model_path": str,
            "kind": str,
            "config": str,
            "plan": str,
            "rows": str,
            "status": str,
        },
        pk="id",
        not_null=["kind", "rows", "status"],
    )


def _v8_contention(db: Database) -> None:
    """Version 8: how busy the machine was while each run was measured (`runs.contention`,
    JSON: engine/measure/contention.py's `Contention.to_json`: others_cpu, steal,
    clock_ratio, verdict, ...); NULL for runs recorded before. The live recording's
    windows are telemetry rows (`others_cpu`, `steal_cpu`). And the 95% intervals of p50
    and p99 from the raw samples' order statistics (`p50_lo_ms` .. `p99_hi_ms`; NULL: too
    few samples, or recorded before)."""
    have = {(t, c) for t in ("runs", "profiles") for c in db.table(t).columns_dict}
    for table, col, kind in (
        ("runs", "contention", "TEXT"),
        *(("runs", c, "REAL") for c in ("p50_lo_ms", "p50_hi_ms", "p99_lo_ms", "p99_hi_ms")),
        ("profiles", "contention", "TEXT"),  # each pass's, likewise
    ):
        if (table, col) not in have:  # a file whose version was set back by hand has it
            db.execute(f"ALTER TABLE {table} ADD COLUMN {col} {kind}")


def _v9_origin(db: Database) -> None:
    """Version 9: where each run came from (`runs.origin`, JSON; engine/session/origins.py):
    a tune's trial (`{"job": "tune", "tune": KEY, "trial": 7}`) or a sweep's point
    (`{"job": "sweep", "dim": "batch", "value": "4"}`); NULL for a run a person started,
    whose kind says it (live, load, bench). The kind stays the measurement's, which
    `compare` matches on. A file from before reads its sweep points from `sweeps.run_ids`."""
    if "origin" not in db.table("runs").columns_dict:  # a file set back by hand has it
        db.execute("ALTER TABLE runs ADD COLUMN origin TEXT")


def _insert_op_times(conn: sqlite3.Connection, rows: list[tuple[object, ...]]) -> None:
    """Insert `rows` into op_times and empty the list."""
    conn.executemany(
        "INSERT INTO op_times (run_id, pass, seq, run_index, node, start_us, dur_us, self_us) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    rows.clear()


MIGRATIONS: list[Migration] = [
    _v1_initial,
    _v2_serving,
    _v3_sweeps,
    _v4_generation,
    _v5_compact_op_events,
    _v6_memory,
    _v7_llm_studies,
    _v8_contention,
    _v9_origin,
]
SCHEMA_VERSION = len(MIGRATIONS)


def stored_version(conn: sqlite3.Connection) -> int | None:
    """The file's schema version; None when it has no OpScope `meta` table (foreign or
    empty). Raises ValueError for a `meta` table that is not OpScope's or is garbled."""
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    if not has_meta:
        return None
    try:
        rows = dict(
            conn.execute(
                "SELECT key, value FROM meta WHERE key IN ('format', 'schema_version')"
            ).fetchall()
        )
    except sqlite3.OperationalError as exc:  # a `meta` table of some other design
        raise ValueError("its meta table is not OpScope's") from exc
    if rows.get("format") != FORMAT_NAME:
        raise ValueError("its meta table is not OpScope's")
    raw = rows.get("schema_version")
    if not isinstance(raw, str | int) or not str(raw).isdigit() or int(raw) < 1:
        raise ValueError(f"unreadable schema version {raw!r}")
    return int(raw)


def migrate(db: Database, migrations: Sequence[Migration] | None = None) -> int:
    """Bring `db` to the newest version by applying the missing migrations in order, each
    in its own transaction; returns the version reached. Raises ValueError for a file
    newer than `migrations` knows."""
    steps = list(MIGRATIONS if migrations is None else migrations)
    current = stored_version(db.conn) or 0
    if current > len(steps):
        raise ValueError(f"session format v{current} is newer than v{len(steps)}")
    for version in range(current + 1, len(steps) + 1):
        with db.atomic():
            steps[version - 1](db)
            db.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?), "
                "('format', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [str(version), FORMAT_NAME],
            )
    return len(steps)


def known_version(p: Path, conn: sqlite3.Connection) -> int | None:
    """The file's version for a reader or a writer: None for no OpScope `meta` table
    (see `other_tables`); SessionFileError (one line) for a garbled `meta` or a file
    newer than this OpScope. SQLite's own UnicodeDecodeError (corrupt bytes) passes."""
    try:
        version = stored_version(conn)
    except UnicodeDecodeError:
        raise  # SQLite's message quoting the file's bytes: corrupt, not foreign
    except ValueError as exc:
        raise SessionFileError(f"not an OpScope session ({exc})", p) from exc
    if version is not None and version > SCHEMA_VERSION:
        raise SessionFileError(newer_message(version), p)
    return version


def other_tables(conn: sqlite3.Connection) -> int:
    """How many tables a database without OpScope's `meta` holds (0: an empty one)."""
    (tables,) = conn.execute(
        "SELECT COUNT(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'"
    ).fetchone()
    return int(tables)


def newer_message(version: int) -> str:
    return (
        f"written by a newer OpScope (session format v{version}; this version reads up "
        f"to v{SCHEMA_VERSION}): please upgrade OpScope to open it"
    )
