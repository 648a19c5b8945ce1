"""Reading a session file, which may come from anyone: opened read-only, checked to be an
OpScope session of a known version, and every value type-checked on the way out.

Every failure (not SQLite, truncated, foreign, newer, corrupt rows) is a one-line
`SessionFileError` naming the file. Compare, export and report build on this API.
"""

from __future__ import annotations

import dataclasses
import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import numpy as np

from engine.errors import SessionFileError
from engine.measure.op_stats import OpStat
from engine.measure.op_trace import NodeEvent, ProfileTrace
from engine.session import columns, held, read_only, schema, writer_liveness
from engine.session.env import MACHINE_PREFIX
from engine.session.generation_rows import GenerationRun, read_generation
from engine.session.latency_rows import read_latency
from engine.session.llm_study_rows import LLMStudyRow, read_llm_studies
from engine.session.memory_rows import MemoryRow, read_memory
from engine.session.model_rows import ModelRow, read_models
from engine.session.origins import read_origins
from engine.session.profile_rows import (
    ProfileRow,
    read_op_events,
    read_ops,
    read_profile_trace,
    read_profiles,
)
from engine.session.rows import RUNS, RunRow, run_row
from engine.session.serving_rows import ServingRun, read_serving
from engine.session.sweep_rows import SweepRow, read_sweeps
from engine.session.timeline_rows import MarkerRow, read_markers, read_telemetry
from engine.session.trust import check_file, corrupt, parse_json, req, typed

# Who hears, once per open, that a file lacks optional columns (their figures read as
# None and show as "-"): the CLI puts it on stderr as one note; the window reads
# `SessionReader.lacking` itself. Empty: nobody.
NOTE_HOOK: list[Callable[[Path, str], None]] = []

P = ParamSpec("P")
R = TypeVar("R")


def _guarded(
    method: Callable[Concatenate[SessionReader, P], R],
) -> Callable[Concatenate[SessionReader, P], R]:
    """Turn SQLite errors and bad values met while reading into a SessionFileError."""

    def wrapper(self: SessionReader, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            try:
                return method(self, *args, **kwargs)
            except sqlite3.OperationalError as exc:
                if (
                    not read_only.undecodable(exc)
                    or self._conn.text_factory is read_only.lenient_text
                ):
                    raise
                # text that is not UTF-8 in a value: shown with U+FFFD, not refused
                self._conn.text_factory = read_only.lenient_text
                return method(self, *args, **kwargs)
        except (sqlite3.Error, ValueError, TypeError, OverflowError) as exc:  # inf as an int
            raise corrupt(
                self.path,
                exc if isinstance(exc, sqlite3.Error | ValueError) else ValueError(str(exc)),
            ) from exc

    functools.update_wrapper(wrapper, method)
    return wrapper


MAX_MACHINES = 64  # other machines a session names
MACHINE_FACTS = 32  # facts per machine
MACHINE_FACT = 256  # characters per fact


class SessionReader:
    """Read-only access to one session file. Use `open_session_file(path)`."""

    def __init__(
        self,
        path: Path,
        conn: sqlite3.Connection,
        version: int,
        tmpdir: str | None = None,
        held_key: held.Key | None = None,
    ) -> None:
        self.path = path
        self.version = version  # the file's own format version
        self.lacking: dict[str, list[str]] = {}  # optional columns the file lacks (read: None)
        self._conn = conn
        self._tmpdir = tmpdir
        self._held = held_key  # released when closed (see held.py)
        self._wal_mode = True  # the header said WAL when opened: a writer may have it open

    @classmethod
    def open(cls, path: str | Path) -> SessionReader:
        """Open read-only and validate: SQLite header and length, OpScope's meta table, a
        known version (older files are migrated in memory, never in place), every table."""
        p = Path(path)
        header = check_file(p)
        try:
            conn, tmpdir = read_only.connect_read_only(p, header)
        except UnicodeDecodeError as exc:  # SQLite's message quoted bytes of the file
            raise corrupt(p, exc) from exc
        key = held.hold(p) if tmpdir is None else None  # a private copy holds nothing here
        try:
            version = read_only.readable_version(p, conn, header)
            if version < schema.SCHEMA_VERSION:
                conn = read_only.migrated_in_memory(conn)
            lacking = columns.check_columns(p, conn)
        except SessionFileError:
            read_only.close(conn, tmpdir, key)
            raise
        except (sqlite3.Error, ValueError) as exc:
            read_only.close(conn, tmpdir, key)
            raise corrupt(p, exc) from exc
        reader = cls(p, conn, version, tmpdir, key)
        reader.lacking = lacking
        note = columns.lacking_note(lacking)
        if note and NOTE_HOOK:
            NOTE_HOOK[0](p, note)
        # header None: being written here
        reader._wal_mode = header is None or read_only.wal_header(header)
        return reader

    def close(self) -> None:
        key, self._held = self._held, None
        read_only.close(self._conn, self._tmpdir, key)

    def backup_to(self, target: sqlite3.Connection) -> None:
        """Copy the whole session, as read (an older file in the current format), into
        `target` with SQLite's online backup."""
        self._conn.backup(target)

    def __enter__(self) -> SessionReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- metadata, models, runs ----------------------------------------------------------

    @_guarded
    def meta(self) -> dict[str, str | None]:
        """Schema version, versions, host, OS, CPU, GPU, driver, created time (text)."""
        out: dict[str, str | None] = {}
        for key, value in self._conn.execute("SELECT key, value FROM meta ORDER BY key"):
            name = req(key, str, "meta.key")
            if not name.startswith((writer_liveness.KEY_PREFIX, MACHINE_PREFIX)):  # the file's
                out[name] = None if value is None else str(value)
        return out

    @_guarded
    def machines(self) -> dict[str, dict[str, str]]:
        """The other machines runs ran on (engine hosts over SSH, as `runs.host` names
        them) -> their facts (host, os, cpu, gpu, versions...), as their hosts told them;
        each fact bounded text, unknown ones left out."""
        out: dict[str, dict[str, str]] = {}
        rows = self._conn.execute(
            "SELECT key, value FROM meta WHERE key LIKE ? ORDER BY key", [MACHINE_PREFIX + "%"]
        )
        for key, value in rows.fetchmany(MAX_MACHINES):
            name = req(key, str, "meta.key")[len(MACHINE_PREFIX) :]
            facts = parse_json(value, dict, "meta.value") or {}
            out[name] = {
                str(k)[:64]: v[:MACHINE_FACT]
                for k, v in list(facts.items())[:MACHINE_FACTS]
                if isinstance(v, str)
            }
        return out

    @_guarded
    def models(self) -> list[ModelRow]:
        return read_models(self._conn)

    @_guarded
    def runs(self) -> list[RunRow]:
        """Every run, oldest first, with its stored statistics (never recomputed)."""
        return self._read_runs(self._run_rows(""))

    @_guarded
    def run(self, run_id: int) -> RunRow:
        rows = self._run_rows("WHERE r.id = ?", run_id)
        if not rows:
            ids = [int(i) for (i,) in self._conn.execute("SELECT id FROM runs ORDER BY id")]
            known = f"runs {ids[0]}-{ids[-1]}" if ids else "no runs"
            raise SessionFileError(f"no run {run_id} ({known})", self.path)
        first, *_ = rows  # its id is the key: one row
        (run,) = self._read_runs([first])
        return run

    def _read_runs(self, rows: list[Any]) -> list[RunRow]:
        """Rows of `RUNS.select()` as runs, each with where it came from (a tune's trial, a
        sweep's point: the file's numbers, the same in every list)."""
        values = [RUNS.values(r) for r in rows]
        found = read_origins(self._conn, [(v["id"], v["kind"] or "bench") for v in values])
        return [self._settled(run_row(v, self.path, found.get(v["id"]))) for v in values]

    def _settled(self, run: RunRow) -> RunRow:
        """A `running` run whose writer is gone (killed, crashed) reads `interrupted`."""
        if run.status != "running":
            return run
        found = self._conn.execute(
            "SELECT value FROM meta WHERE key = ?", [writer_liveness.key(run.id)]
        ).fetchall()
        text = next((typed(v, str, "meta.value", nullable=True) for (v,) in found), None)
        if writer_liveness.writer_alive(text, self.path, run.id, self._wal_mode) is not False:
            return run
        why = "its recording process is gone (killed or crashed)"
        return dataclasses.replace(run, status="interrupted", error=run.error or why)

    @_guarded
    def last_run_id(self) -> int | None:
        (last,) = self._conn.execute("SELECT MAX(id) FROM runs").fetchone()
        return typed(last, int, "runs.id", nullable=True)

    def _run_rows(self, where: str, *args: object) -> list[Any]:
        return self._conn.execute(RUNS.select(where, "ORDER BY r.id"), args).fetchall()

    # -- samples -----------------------------------------------------------------------

    @_guarded
    def latency(self, run_id: int) -> tuple[np.ndarray, np.ndarray]:
        """(starts_ns, latencies_ns) as int64 arrays, in sample order; starts are relative
        to the run's timing origin (runs.timing_origin_ns, wall clock)."""
        return read_latency(self._conn, run_id)

    @_guarded
    def serving(self, run_id: int) -> ServingRun | None:
        """A serving run's set-up, figures, requests and batches; None for other runs."""
        return read_serving(self._conn, run_id)

    @_guarded
    def generation(self, run_id: int) -> GenerationRun | None:
        """A generation run's shape, figures and raw TTFT/TPOT samples; None for others."""
        return read_generation(self._conn, run_id)

    @_guarded
    def memory(self) -> list[MemoryRow]:
        """Every recorded memory report (`opscope memory --session`, the Memory dock),
        oldest first, its fields checked; none in a file older than format v6."""
        return read_memory(self._conn)

    @_guarded
    def llm_studies(self) -> list[LLMStudyRow]:
        """Every recorded LLM serving study (`simulate --llm --session`, `load --llm
        --session`, the LLM Serving dock), oldest first, its fields checked; none in a file
        older than format v7."""
        return read_llm_studies(self._conn)

    @_guarded
    def sweeps(self) -> list[SweepRow]:
        """Every recorded sweep (`opscope sweep --session`), oldest first; none in a file
        older than format v3."""
        return read_sweeps(self._conn)

    @_guarded
    def telemetry(self, run_id: int | None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """name -> (wall_ns int64, value float64) in time order."""
        return read_telemetry(self._conn, run_id)

    @_guarded
    def markers(self, run_id: int | None = None) -> list[MarkerRow]:
        """Markers and notes of one run, or of the whole session (run_id None)."""
        return read_markers(self._conn, run_id)

    # -- profiles ----------------------------------------------------------------------

    @_guarded
    def profiles(self, run_id: int) -> list[ProfileRow]:
        """One summary per profiling pass: runs, coverage, overhead, nodes per provider."""
        return read_profiles(self._conn, run_id)

    def ops(self, run_id: int, kind: str = "node", pass_: int | None = None) -> list[OpStat]:
        """Per-node (kind="node") or per-op-type statistics of a pass (default: the last),
        largest time first."""
        if kind not in ("node", "op_type"):
            raise ValueError(f"kind must be 'node' or 'op_type', got {kind!r}")
        return self._ops(run_id, kind, pass_)

    @_guarded
    def _ops(self, run_id: int, kind: str, pass_: int | None) -> list[OpStat]:
        return read_ops(self._conn, run_id, kind, pass_)

    @_guarded
    def op_events(self, run_id: int, pass_: int | None = None) -> list[NodeEvent]:
        """The raw per-inference node rows of a pass, in trace order (stored compactly since
        format v5: `op_nodes` once per run, `op_times` per execution)."""
        return read_op_events(self._conn, run_id, pass_)

    @_guarded
    def profile_trace(self, run_id: int, pass_: int | None = None) -> ProfileTrace:
        """The pass rebuilt as a ProfileTrace, so `engine.measure.op_stats` can recompute
        from it."""
        return read_profile_trace(self._conn, run_id, pass_)


__all__ = ["MarkerRow", "RunRow", "SessionReader", "SweepRow"]
