"""Writing a session file: `SessionStore` is its one writer; `open_session_file` is for
reading (read-only, validated).

WAL with synchronous=NORMAL: a commit is durable against the process being killed
(`kill -9`, a native crash); only an OS crash or power loss can drop the last commits.
The recorder commits at least twice a second while a run streams samples.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
from sqlite_utils import Database

from engine.errors import SessionFileError
from engine.events import AccuracyResult, OpProfile, ServedRequests, ServingStarted, TimingDone
from engine.measure.contention import Contention
from engine.measure.op_trace import NodeEvent
from engine.model.info import ModelInfo
from engine.session import held, schema, writer_liveness
from engine.session.env import MACHINE_PREFIX
from engine.session.reader import SessionReader
from engine.session.trust import check_file, json_text
from engine.session.writable import (
    BUSY_TIMEOUT_S,
    connect_for_writing,
    initialise,
    utc_now,
    write_error,
)


class SessionStore:
    """The single writer of one session file. Not thread-safe; one per file at a time (a
    second writer waits up to BUSY_TIMEOUT_S for SQLite's lock)."""

    def __init__(self, path: Path, db: Database, held_key: held.Key | None = None) -> None:
        self.path = path
        self.db = db
        self._held = held_key  # released when closed (see held.py)

    @classmethod
    def create_or_open(
        cls, path: str | Path, busy_timeout_s: float = BUSY_TIMEOUT_S
    ) -> SessionStore:
        """Create a new session file, or open an existing one to append runs (migrating an
        older format). Refuses foreign, corrupt and newer files with a SessionFileError;
        waits up to `busy_timeout_s` for another process's lock."""
        p = Path(path)
        created = not p.exists()
        if not created:
            check_file(p, allow_empty=True)
        elif not p.parent.is_dir():
            raise SessionFileError(f"folder {p.parent} does not exist", p)
        key = None if created else held.hold(p)  # before the connection takes its locks
        try:
            conn = connect_for_writing(p, busy_timeout_s)
        except sqlite3.Error as exc:
            held.release(key)
            raise write_error(p, exc, created) from exc
        if key is None:
            key = held.hold(p)
        try:
            store = cls(p, initialise(p, conn), key)
            store.set_busy_timeout(BUSY_TIMEOUT_S)
            return store
        except BaseException as exc:
            conn.close()
            held.release(key)
            if created:  # a full disk or a read-only folder leaves no empty file behind
                with contextlib.suppress(OSError):
                    remove_session_file(p)
            if isinstance(exc, SessionFileError):
                named = write_error(p, exc, created)
                if named is not exc:
                    raise named from exc
            raise

    def set_busy_timeout(self, seconds: float) -> None:
        """How long a write waits for another connection's lock before SQLITE_BUSY."""
        self.db.execute(f"PRAGMA busy_timeout = {max(0, int(seconds * 1000))}")

    def close(self) -> None:
        """Checkpoint and leave a single self-contained file (rollback-journal mode), so it
        can be copied and read anywhere; stays in WAL mode if a reader holds it open."""
        writer_liveness.closed(self.path)  # a run left open here is no longer being written
        with contextlib.suppress(sqlite3.Error):
            self.db.execute("PRAGMA busy_timeout = 0")  # never stall on a reader's lock
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.db.disable_wal()
        self.db.close()
        held.release(self._held)
        self._held = None

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Group writes into one commit (nested calls join the outer transaction)."""
        with self.db.atomic():
            yield

    # -- models and runs ---------------------------------------------------------------

    def upsert_model(self, info: ModelInfo) -> str:
        """The model's row, keyed by the hash of its files; returns the sha256."""
        models = self.db.table("models")
        with self.db.atomic():
            models.upsert(
                {
                    "sha256": info.sha256,
                    "name": info.name,
                    "path": info.path,
                    "file_bytes": info.file_bytes,
                    "inputs": json_text([v.to_json() for v in info.inputs]),
                    "outputs": json_text([v.to_json() for v in info.outputs]),
                    "info": json_text(info.to_json()),
                },
                pk="sha256",
            )
            self.db.execute(
                "UPDATE models SET first_seen = COALESCE(first_seen, ?) WHERE sha256 = ?",
                [utc_now(), info.sha256],
            )
        return info.sha256

    def start_run(self, fields: dict[str, Any]) -> int:
        """A new run row with status 'running'; returns its id."""
        facts = self.db.execute(
            "SELECT key, value FROM meta WHERE key IN ('host', 'app_version')"
        ).fetchall()
        row = {"status": "running", "started_at": utc_now(), "samples": 0, **dict(facts), **fields}
        table = self.db.table("runs")
        with self.db.atomic():
            table.insert(row)
            run_id = table.last_pk
            assert isinstance(run_id, int)
            self.db.execute(  # who records it, so a reader can tell it was killed
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                [writer_liveness.key(run_id), writer_liveness.this_writer()],
            )
        writer_liveness.opened(self.path, run_id)
        return run_id

    def note_machine(self, name: str, facts: dict[str, str | None]) -> None:
        """Another machine's facts (an engine host's over SSH: its runs name it in
        `runs.host`) as meta `machine:NAME`; none for the session's own machine."""
        own = self.db.execute("SELECT value FROM meta WHERE key = 'host'").fetchone()
        if own is not None and own[0] == name:
            return
        self.db.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
            [f"{MACHINE_PREFIX}{name}", json_text(facts)],
        )

    def update_run(self, run_id: int, fields: dict[str, Any]) -> None:
        self.db.table("runs").update(run_id, fields)

    def end_run(self, run_id: int, status: str, error: str | None = None) -> None:
        with self.db.atomic():
            self.update_run(run_id, {"status": status, "error": error, "ended_at": utc_now()})
            self.db.execute("DELETE FROM meta WHERE key = ?", [writer_liveness.key(run_id)])
        writer_liveness.closed(self.path, run_id)

    def set_timing(self, run_id: int, done: TimingDone) -> None:
        lat, tp = done.latency, done.throughput
        self.update_run(
            run_id,
            {
                "samples": lat.count,
                "mean_ms": lat.mean,
                "std_ms": lat.std,
                "min_ms": lat.min,
                "p50_ms": lat.p50,
                "p90_ms": lat.p90,
                "p95_ms": lat.p95,
                "p99_ms": lat.p99,
                "max_ms": lat.max,
                "inferences_per_s": tp.inferences_per_s,
                "samples_per_s": tp.samples_per_s,
                "stable": int(done.stable),
                "warmup_runs": done.warmup_runs,
                "elapsed_s": done.elapsed_s,
                **_contention_field(done),
            },
        )

    def set_contention(self, run_id: int, contention: Contention) -> None:
        """How busy the machine was over the run (a run that ended without a summary)."""
        self.update_run(run_id, {"contention": json_text(contention.to_json())})

    def set_accuracy(self, run_id: int, acc: AccuracyResult) -> None:
        self.update_run(run_id, {"accuracy": json_text(acc.to_json())})

    # -- samples -----------------------------------------------------------------------

    def add_latency(
        self, run_id: int, first_index: int, starts_ns: np.ndarray, latencies_ns: np.ndarray
    ) -> int:
        """Append raw samples numbered from `first_index`; returns the next index. Joins the
        caller's transaction if one is open.

        The hot path: the connection's own executemany over zipped `.tolist()` columns,
        not sqlite-utils' insert_all (dict rows: 2-3x slower, see bench/store_insert.py)."""
        n = int(latencies_ns.size)
        if n != starts_ns.size:
            raise ValueError(f"{starts_ns.size} starts for {n} latencies")
        rows = zip(
            repeat(run_id),
            range(first_index, first_index + n),
            starts_ns.tolist(),
            latencies_ns.tolist(),
            strict=False,
        )
        with self.db.atomic():
            self.db.conn.executemany(
                "INSERT INTO latency (run_id, i, start_ns, latency_ns) VALUES (?, ?, ?, ?)", rows
            )
        return first_index + n

    # -- serving runs ------------------------------------------------------------------

    def start_serving(self, run_id: int, ev: ServingStarted) -> None:
        self.db.table("serving").upsert(
            {
                "run_id": run_id,
                "simulated": int(ev.simulated),
                "traffic": json_text(ev.traffic),
                "batching": json_text(ev.batching),
                "cache": json_text(ev.cache),
                "warmup_s": ev.warmup_s,
                "calibration": json_text(ev.calibration) if ev.calibration else None,
            },
            pk="run_id",
        )

    def set_serving_origin(self, run_id: int, origin_wall_ns: int) -> None:
        self.db.execute(
            "UPDATE serving SET origin_ns = ? WHERE run_id = ?", [origin_wall_ns, run_id]
        )

    def set_serving_summary(
        self, run_id: int, summary: dict[str, Any], answers: dict[str, Any]
    ) -> None:
        self.db.execute(
            "UPDATE serving SET summary = ?, answers = ? WHERE run_id = ?",
            [json_text(summary), json_text(answers) if answers else None, run_id],
        )

    def add_served(self, run_id: int, chunk: ServedRequests) -> int:
        """Append a chunk of ended requests and the batches run since; returns the number of
        requests. Joins the caller's transaction if one is open."""
        c = chunk

        def ns(values: np.ndarray) -> list[int | None]:
            out = np.round(np.asarray(values, np.float64) * 1e9)
            return [None if v != v else int(v) for v in out.tolist()]

        requests = zip(
            repeat(run_id),
            np.asarray(c.index, np.int64).tolist(),
            ns(c.scheduled),
            ns(c.sent),
            ns(c.dequeued),
            ns(c.done),
            np.asarray(c.batch, np.int64).tolist(),
            np.asarray(c.hit, np.int64).tolist(),
            np.asarray(c.outcome, np.int64).tolist(),
            strict=False,
        )
        batches = zip(
            repeat(run_id),
            np.asarray(c.batch_id, np.int64).tolist(),
            ns(c.batch_start),
            ns(c.batch_end),
            np.asarray(c.batch_size, np.int64).tolist(),
            np.asarray(c.batch_instance, np.int64).tolist(),
            strict=False,
        )
        with self.db.atomic():
            self.db.conn.executemany(
                "INSERT OR REPLACE INTO requests (run_id, i, scheduled_ns, sent_ns, "
                "dequeued_ns, done_ns, batch, hit, outcome) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                requests,
            )
            self.db.conn.executemany(
                "INSERT OR REPLACE INTO batches (run_id, id, start_ns, end_ns, size, instance) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                batches,
            )
        return int(np.asarray(c.index).size)

    # -- sweeps ------------------------------------------------------------------------

    def add_sweep(
        self,
        *,
        model_path: str,
        dim: str,
        config: dict[str, Any],
        result: dict[str, Any],
        run_ids: list[int],
        partial: bool = False,
    ) -> int:
        """One sweep as a whole (`SweepResult.to_json()` as `result`); returns its id."""
        return self._add_row("sweeps", model_path=model_path, dim=dim, config=config,
                             result=result, run_ids=run_ids,
                             status="partial" if partial else "complete")  # fmt: skip

    @contextlib.contextmanager
    def _immediate(self) -> Iterator[None]:
        """A write transaction that holds the write lock from its start (BEGIN IMMEDIATE,
        waiting up to the busy timeout for it). A deferred one, as sqlite-utils' `atomic`
        begins, reads first and cannot take the lock once another connection has committed
        since that read: in WAL mode that is SQLITE_BUSY at once, with no wait (a study
        written while the window recorded failed so: 'database is locked')."""
        conn = self.db.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _add_row(self, name: str, **fields: Any) -> int:
        """A row of a table of rows of their own (not a run's), stamped `created_at`, its
        objects and lists stored as JSON; returns its id."""
        table = self.db.table(name)
        row = {k: json_text(v) if isinstance(v, dict | list) else v for k, v in fields.items()}
        with self._immediate():
            table.insert({"created_at": utc_now(), **row})
        row_id = table.last_pk
        assert isinstance(row_id, int)
        return row_id

    # -- memory reports --------------------------------------------------------------

    def add_memory(self, *, model_path: str, config: dict[str, Any], report: dict[str, Any]) -> int:
        """One memory report (engine/run/memory_job.py's result); returns its id."""
        return self._add_row("memory", model_path=model_path, config=config, report=report)

    # -- LLM serving studies -----------------------------------------------------------

    def add_llm_study(
        self,
        *,
        model_path: str,
        kind: str,
        config: dict[str, Any],
        plan: dict[str, Any],
        rows: list[dict[str, Any]],
        partial: bool = False,
    ) -> int:
        """One LLM serving study (engine/serve/llm/study.py's rows); returns its id."""
        return self._add_row("llm_studies", model_path=model_path, kind=kind, config=config,
                             plan=plan, rows=rows,
                             status="partial" if partial else "complete")  # fmt: skip

    def add_telemetry(self, run_id: int | None, rows: Iterable[tuple[int, str, float]]) -> int:
        """Append (wall_ns, name, value) samples, e.g. GPU clock or memory; returns count."""
        return self.add_telemetry_rows([(run_id, t, name, v) for t, name, v in rows])

    def add_telemetry_rows(self, rows: Iterable[tuple[int | None, int, str, float]]) -> int:
        """Append (run_id, wall_ns, name, value) rows; returns count."""
        data = [(run_id, int(t), str(name), float(v)) for run_id, t, name, v in rows]
        with self.db.atomic():
            self.db.conn.executemany(
                "INSERT INTO telemetry (run_id, wall_ns, name, value) VALUES (?, ?, ?, ?)", data
            )
        return len(data)

    def add_marker(
        self,
        run_id: int | None,
        kind: str,
        label: str,
        text: str = "",
        *,
        t_ns: int | None = None,
        wall_ns: int | None = None,
    ) -> int:
        """A note on the timeline (a config change, a user note, an engine notice).
        `t_ns` is relative to the run's timing origin when known; `wall_ns` defaults to now."""
        table = self.db.table("markers")
        with self.db.atomic():
            table.insert(
                {
                    "run_id": run_id,
                    "wall_ns": time.time_ns() if wall_ns is None else wall_ns,
                    "t_ns": t_ns,
                    "kind": kind,
                    "label": label,
                    "text": text,
                }
            )
        marker_id = table.last_pk
        assert isinstance(marker_id, int)
        return marker_id

    def set_marker_offsets(self, run_id: int, origin_wall_ns: int) -> None:
        """Fill `t_ns` (relative to the run's timing origin) of the run's markers that were
        written before the origin was known."""
        self.db.execute(
            "UPDATE markers SET t_ns = wall_ns - ? WHERE run_id = ? AND t_ns IS NULL",
            [origin_wall_ns, run_id],
        )

    # -- profiles ----------------------------------------------------------------------

    def add_profile(self, run_id: int, prof: OpProfile) -> int:
        """One profiling pass: its summary, per-inference spans, per-node and per-op-type
        statistics, and every raw per-inference node row. Returns the pass number."""
        from engine.measure.op_stats import stat_to_json

        with self.db.atomic():
            (last,) = self.db.execute(
                "SELECT MAX(pass) FROM profiles WHERE run_id = ?", [run_id]
            ).fetchone()
            pass_ = 0 if last is None else int(last) + 1
            self.db.table("profiles").insert(
                {
                    "run_id": run_id,
                    "pass": pass_,
                    "runs": prof.runs,
                    "coverage": prof.coverage,
                    "overhead": prof.profile_overhead,
                    "provider_nodes": json_text(prof.provider_nodes),
                    "nodes_total": len(prof.ops),
                    "recorded_at": utc_now(),
                    "contention": json_text(prof.contention.to_json()) if prof.contention else None,
                }
            )
            ops = [
                {"run_id": run_id, "pass": pass_, "kind": kind, "rank": rank, **stat_to_json(stat)}
                for kind, stats in (("node", prof.ops), ("op_type", prof.op_types))
                for rank, stat in enumerate(stats)
            ]
            self.db.table("ops").insert_all(ops, batch_size=1000)
            trace = prof.trace
            conn = self.db.conn  # raw executemany: a pass can hold 10^5 node rows
            conn.executemany(
                "INSERT INTO profile_runs (run_id, pass, run_index, start_us, dur_us) "
                "VALUES (?, ?, ?, ?, ?)",
                [(run_id, pass_, r.run_index, r.start_us, r.dur_us) for r in trace.runs],
            )
            _add_op_rows(conn, run_id, pass_, trace.nodes)
        return pass_


SIDECARS = ("-wal", "-shm", "-journal")


def remove_session_file(p: Path) -> None:
    """Delete a session file with its SQLite sidecars: a -wal left beside a new file of the
    same name would be replayed into it. Refuses a file this process has open (held.py)."""
    if held.is_held(p):
        raise SessionFileError("is open in this window: close it first", p)
    for suffix in ("", *SIDECARS):
        Path(f"{p}{suffix}").unlink(missing_ok=True)


def _add_op_rows(
    conn: sqlite3.Connection, run_id: int, pass_: int, events: Sequence[NodeEvent]
) -> None:
    """A pass's per-inference node rows, compact: nodes not yet seen in this run go to
    `op_nodes` once (ids in order of first appearance), every execution to `op_times`."""
    cols = ", ".join(schema.OP_NODE_COLUMNS)
    ids: dict[tuple[Any, ...], int] = {
        tuple(key): node
        for node, *key in conn.execute(
            f"SELECT id, {cols} FROM op_nodes WHERE run_id = ?", [run_id]
        )
    }
    shapes: dict[Any, str] = {}

    def shape_json(value: Any) -> str:
        text = shapes.get(value)
        if text is None:
            text = shapes[value] = json_text(value)
        return text

    new_nodes: list[tuple[Any, ...]] = []
    times: list[tuple[Any, ...]] = []
    for seq, n in enumerate(events):
        key = (
            n.name,
            n.parent,
            n.op_type,
            n.provider,
            n.node_index,
            n.activation_bytes,
            n.parameter_bytes,
            n.output_bytes,
            shape_json(n.input_shapes),
            shape_json(n.output_shapes),
        )
        node = ids.get(key)
        if node is None:
            node = ids[key] = len(ids)
            new_nodes.append((run_id, node, *key))
        self_us = None if n.self_us == n.dur_us else n.self_us
        times.append((run_id, pass_, seq, n.run_index, node, n.start_us, n.dur_us, self_us))
    conn.executemany(
        f"INSERT INTO op_nodes (run_id, id, {cols}) VALUES ({', '.join('?' * 12)})", new_nodes
    )
    conn.executemany(
        "INSERT INTO op_times (run_id, pass, seq, run_index, node, start_us, dur_us, self_us) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        times,
    )


def open_session_file(path: str | Path) -> SessionReader:
    """Open a session read-only and validate it (see `SessionReader.open`)."""
    return SessionReader.open(path)


def _contention_field(done: TimingDone) -> dict[str, Any]:
    """The run's contention column, when the timing pass measured it, and its percentiles'
    intervals."""
    out: dict[str, Any] = {}
    for q, ci in (("p50", done.latency.p50_ci), ("p99", done.latency.p99_ci)):
        out[f"{q}_lo_ms"], out[f"{q}_hi_ms"] = ci if ci else (None, None)
    if done.contention is not None:
        out["contention"] = json_text(done.contention.to_json())
    return out
