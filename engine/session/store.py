"""Writing a session file: `SessionStore` is its one writer; `open_session_file` is for
reading (read-only, validated).

WAL with synchronous=NORMAL: a commit is durable against the process being killed
(`kill -9`, a native crash); only an OS crash or power loss can drop the last commits.
The recorder commits at least twice a second while a run streams samples.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from sqlite_utils import Database

from engine.errors import SessionFileError
from engine.events import AccuracyResult, OpProfile, ServedRequests, ServingStarted, TimingDone
from engine.measure.contention import Contention
from engine.model.info import ModelInfo
from engine.session import held, read_only, serving_rows, writer_liveness
from engine.session.env import MACHINE_PREFIX
from engine.session.latency_rows import add_latency
from engine.session.llm_study_rows import LLM_STUDIES
from engine.session.memory_rows import MEMORY
from engine.session.model_rows import upsert_model
from engine.session.profile_rows import add_profile
from engine.session.reader import SessionReader
from engine.session.rows import RUNS
from engine.session.spec import RecordSpec
from engine.session.sweep_rows import SWEEPS
from engine.session.timeline_rows import add_marker, add_telemetry
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
        read_only.check_companions(p)  # a -wal folder: SQLite said only "unable to open"
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
        with self.db.atomic():
            return upsert_model(self.db.conn, info)

    def start_run(self, fields: dict[str, Any]) -> int:
        """A new run row with status 'running'; returns its id."""
        facts = self.db.execute(
            "SELECT key, value FROM meta WHERE key IN ('host', 'app_version')"
        ).fetchall()
        row = {"status": "running", "started_at": utc_now(), "samples": 0, **dict(facts), **fields}
        with self.db.atomic():
            run_id = RUNS.write(self.db.conn, **row)
            self.db.execute(  # who records it, so a reader can tell it was killed
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                [writer_liveness.key(run_id), writer_liveness.this_writer()],
            )
        writer_liveness.opened(self.path, run_id)
        return run_id

    def note_machine(self, name: str, facts: dict[str, str | None]) -> None:
        """Another machine's facts (an engine host's over SSH: its runs name it in
        `runs.host`) as meta `machine:NAME`; none for the session's own machine."""
        own = self.db.execute("SELECT value FROM meta WHERE key = 'host'").fetchall()
        if any(host == name for (host,) in own):
            return
        self.db.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
            [f"{MACHINE_PREFIX}{name}", json_text(facts)],
        )

    def update_run(self, run_id: int, fields: dict[str, Any]) -> None:
        """Set the named columns of a run (committed, or joining the caller's transaction)."""
        if fields:
            with self.db.atomic():
                RUNS.update(self.db.conn, {"id": run_id}, **fields)

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
        caller's transaction if one is open (the hot path: see latency_rows.py)."""
        with self.db.atomic():
            return add_latency(self.db.conn, run_id, first_index, starts_ns, latencies_ns)

    # -- serving runs ------------------------------------------------------------------

    def start_serving(self, run_id: int, ev: ServingStarted) -> None:
        with self.db.atomic():
            serving_rows.start_serving(self.db.conn, run_id, ev)

    def set_serving_origin(self, run_id: int, origin_wall_ns: int) -> None:
        serving_rows.set_serving_origin(self.db.conn, run_id, origin_wall_ns)

    def set_serving_summary(
        self, run_id: int, summary: dict[str, Any], answers: dict[str, Any]
    ) -> None:
        serving_rows.set_serving_summary(self.db.conn, run_id, summary, answers)

    def add_served(self, run_id: int, chunk: ServedRequests) -> int:
        """Append a chunk of ended requests and the batches run since; returns the number of
        requests. Joins the caller's transaction if one is open."""
        with self.db.atomic():
            return serving_rows.add_served(self.db.conn, run_id, chunk)

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
        return self._add_row(SWEEPS, model_path=model_path, dim=dim, config=config,
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

    def _add_row(self, spec: RecordSpec[Any], **fields: Any) -> int:
        """A row of a table of rows of their own (not a run's), stamped `created_at`, its
        objects and lists stored as JSON; returns its id."""
        row = {k: json_text(v) if isinstance(v, dict | list) else v for k, v in fields.items()}
        with self._immediate():
            return spec.write(self.db.conn, created_at=utc_now(), **row)

    # -- memory reports --------------------------------------------------------------

    def add_memory(self, *, model_path: str, config: dict[str, Any], report: dict[str, Any]) -> int:
        """One memory report (engine/run/memory_job.py's result); returns its id."""
        return self._add_row(MEMORY, model_path=model_path, config=config, report=report)

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
        return self._add_row(LLM_STUDIES, model_path=model_path, kind=kind, config=config,
                             plan=plan, rows=rows,
                             status="partial" if partial else "complete")  # fmt: skip

    def add_telemetry(self, run_id: int | None, rows: Iterable[tuple[int, str, float]]) -> int:
        """Append (wall_ns, name, value) samples, e.g. GPU clock or memory; returns count."""
        return self.add_telemetry_rows([(run_id, t, name, v) for t, name, v in rows])

    def add_telemetry_rows(self, rows: Iterable[tuple[int | None, int, str, float]]) -> int:
        """Append (run_id, wall_ns, name, value) rows; returns count."""
        with self.db.atomic():
            return add_telemetry(self.db.conn, rows)

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
        with self.db.atomic():
            return add_marker(self.db.conn, run_id, kind, label, text, t_ns, wall_ns)

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
        with self.db.atomic():
            return add_profile(self.db.conn, run_id, prof)


SIDECARS = ("-wal", "-shm", "-journal")


def remove_session_file(p: Path) -> None:
    """Delete a session file with its SQLite sidecars: a -wal left beside a new file of the
    same name would be replayed into it. Refuses a file this process has open (held.py)."""
    if held.is_held(p):
        raise SessionFileError("is open in this window: close it first", p)
    for suffix in ("", *SIDECARS):
        Path(f"{p}{suffix}").unlink(missing_ok=True)


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
