"""Reading a session file, which may come from anyone: opened read-only, checked to be an
OpScope session of a known version, and every value type-checked on the way out.

Every failure (not SQLite, truncated, foreign, newer, corrupt rows) is a one-line
`SessionFileError` naming the file. Compare, export and report build on this API.
"""

from __future__ import annotations

import dataclasses
import functools
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from itertools import chain
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import numpy as np
from sqlite_utils import Database

from engine.errors import SessionFileError
from engine.measure.op_trace import NodeEvent, ProfileTrace, RunSpan, Shapes
from engine.session import columns, held, schema, writer_liveness
from engine.session.env import MACHINE_PREFIX
from engine.session.generation_rows import GenerationRun, read_generation
from engine.session.llm_study_rows import LLMStudyRow, read_llm_studies
from engine.session.memory_rows import MemoryRow, read_memory
from engine.session.rows import MarkerRow, RunRow, op_stat_row, run_row
from engine.session.serving_rows import ServingRun, read_serving
from engine.session.sweep_rows import SweepRow, read_sweeps
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
                if not _undecodable(exc) or self._conn.text_factory is _lenient_text:
                    raise
                # text that is not UTF-8 in a value: shown with U+FFFD, not refused
                self._conn.text_factory = _lenient_text
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
            conn, tmpdir = _connect_read_only(p, header)
        except UnicodeDecodeError as exc:  # SQLite's message quoted bytes of the file
            raise corrupt(p, exc) from exc
        key = held.hold(p) if tmpdir is None else None  # a private copy holds nothing here
        try:
            version = _readable_version(p, conn, header)
            if version < schema.SCHEMA_VERSION:
                conn = _migrated_in_memory(conn)
            lacking = columns.check_columns(p, conn)
        except SessionFileError:
            _close(conn, tmpdir, key)
            raise
        except (sqlite3.Error, ValueError) as exc:
            _close(conn, tmpdir, key)
            raise corrupt(p, exc) from exc
        reader = cls(p, conn, version, tmpdir, key)
        reader.lacking = lacking
        note = columns.lacking_note(lacking)
        if note and NOTE_HOOK:
            NOTE_HOOK[0](p, note)
        reader._wal_mode = header is None or _wal_header(header)  # None: being written here
        return reader

    def close(self) -> None:
        key, self._held = self._held, None
        _close(self._conn, self._tmpdir, key)

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
    def models(self) -> list[dict[str, Any]]:
        rows = self._conn.execute(
            "SELECT sha256, name, path, file_bytes, inputs, outputs, info, first_seen "
            "FROM models ORDER BY first_seen, sha256"
        ).fetchall()
        return [
            {
                "sha256": req(r[0], str, "models.sha256"),
                "name": typed(r[1], str, "models.name", nullable=True),
                "path": typed(r[2], str, "models.path", nullable=True),
                "file_bytes": typed(r[3], int, "models.file_bytes", nullable=True),
                "inputs": parse_json(r[4], list, "models.inputs") or [],
                "outputs": parse_json(r[5], list, "models.outputs") or [],
                "info": parse_json(r[6], dict, "models.info") or {},
                "first_seen": typed(r[7], str, "models.first_seen", nullable=True),
            }
            for r in rows
        ]

    @_guarded
    def runs(self) -> list[RunRow]:
        """Every run, oldest first, with its stored statistics (never recomputed)."""
        return [self._settled(run_row(r, self.path)) for r in self._run_rows("")]

    @_guarded
    def run(self, run_id: int) -> RunRow:
        rows = self._run_rows("WHERE r.id = ?", run_id)
        if not rows:
            ids = [int(i) for (i,) in self._conn.execute("SELECT id FROM runs ORDER BY id")]
            known = f"runs {ids[0]}-{ids[-1]}" if ids else "no runs"
            raise SessionFileError(f"no run {run_id} ({known})", self.path)
        return self._settled(run_row(rows[0], self.path))

    def _settled(self, run: RunRow) -> RunRow:
        """A `running` run whose writer is gone (killed, crashed) reads `interrupted`."""
        if run.status != "running":
            return run
        row = self._conn.execute(
            "SELECT value FROM meta WHERE key = ?", [writer_liveness.key(run.id)]
        ).fetchone()
        text = typed(row[0], str, "meta.value", nullable=True) if row else None
        if writer_liveness.writer_alive(text, self.path, run.id, self._wal_mode) is not False:
            return run
        why = "its recording process is gone (killed or crashed)"
        return dataclasses.replace(run, status="interrupted", error=run.error or why)

    @_guarded
    def last_run_id(self) -> int | None:
        (last,) = self._conn.execute("SELECT MAX(id) FROM runs").fetchone()
        return typed(last, int, "runs.id", nullable=True)

    def _run_rows(self, where: str, *args: object) -> list[sqlite3.Row]:
        cur = self._conn.cursor()
        cur.row_factory = sqlite3.Row
        return cur.execute(
            "SELECT r.*, m.name AS model_name FROM runs r "
            f"LEFT JOIN models m ON m.sha256 = r.model_sha256 {where} ORDER BY r.id",
            args,
        ).fetchall()

    # -- samples -----------------------------------------------------------------------

    @_guarded
    def latency(self, run_id: int) -> tuple[np.ndarray, np.ndarray]:
        """(starts_ns, latencies_ns) as int64 arrays, in sample order; starts are relative
        to the run's timing origin (runs.timing_origin_ns, wall clock)."""
        columns.check_integers(self._conn, "latency", run_id, ("start_ns", "latency_ns"))
        cur = self._conn.execute(
            "SELECT start_ns, latency_ns FROM latency WHERE run_id = ? ORDER BY i", [run_id]
        )
        flat = np.fromiter(chain.from_iterable(cur), dtype=np.int64)
        pairs = flat.reshape(-1, 2)
        return pairs[:, 0].copy(), pairs[:, 1].copy()

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
        out: dict[str, tuple[list[int], list[float]]] = {}
        for name, wall_ns, value in self._conn.execute(
            "SELECT name, wall_ns, value FROM telemetry WHERE run_id IS ? ORDER BY wall_ns, rowid",
            [run_id],
        ):
            times, values = out.setdefault(req(name, str, "telemetry.name"), ([], []))
            times.append(req(wall_ns, int, "telemetry.wall_ns"))
            v = typed(value, float, "telemetry.value", nullable=True)
            values.append(float("nan") if v is None else v)
        return {
            k: (np.array(t, dtype=np.int64), np.array(v, dtype=np.float64))
            for k, (t, v) in out.items()
        }

    @_guarded
    def markers(self, run_id: int | None = None) -> list[MarkerRow]:
        """Markers and notes of one run, or of the whole session (run_id None)."""
        sql = "SELECT id, run_id, wall_ns, t_ns, kind, label, text FROM markers"
        args: list[object] = []
        if run_id is not None:
            sql += " WHERE run_id = ?"
            args.append(run_id)
        return [
            MarkerRow(
                id=req(r[0], int, "markers.id"),
                run_id=typed(r[1], int, "markers.run_id", nullable=True),
                wall_ns=req(r[2], int, "markers.wall_ns"),
                t_ns=typed(r[3], int, "markers.t_ns", nullable=True),
                kind=req(r[4], str, "markers.kind"),
                label=typed(r[5], str, "markers.label", nullable=True) or "",
                text=typed(r[6], str, "markers.text", nullable=True) or "",
            )
            for r in self._conn.execute(sql + " ORDER BY wall_ns, id", args)
        ]

    # -- profiles ----------------------------------------------------------------------

    @_guarded
    def profiles(self, run_id: int) -> list[dict[str, Any]]:
        """One summary per profiling pass: runs, coverage, overhead, nodes per provider."""
        rows = self._conn.execute(
            "SELECT pass, runs, coverage, overhead, provider_nodes, nodes_total, recorded_at, "
            "contention FROM profiles WHERE run_id = ? ORDER BY pass",
            [run_id],
        ).fetchall()
        return [
            {
                "pass": req(r[0], int, "profiles.pass"),
                "runs": req(r[1], int, "profiles.runs"),
                "coverage": typed(r[2], float, "profiles.coverage", nullable=True),
                "overhead": typed(r[3], float, "profiles.overhead", nullable=True),
                "provider_nodes": _int_map(parse_json(r[4], dict, "profiles.provider_nodes")),
                "nodes_total": typed(r[5], int, "profiles.nodes_total", nullable=True),
                "recorded_at": typed(r[6], str, "profiles.recorded_at", nullable=True),
                "contention": parse_json(r[7], dict, "profiles.contention"),
            }
            for r in rows
        ]

    def ops(
        self, run_id: int, kind: str = "node", pass_: int | None = None
    ) -> list[dict[str, Any]]:
        """Per-node (kind="node") or per-op-type statistics of a pass (default: the last),
        largest time first, shaped like `engine.measure.op_stats.stat_to_json`."""
        if kind not in ("node", "op_type"):
            raise ValueError(f"kind must be 'node' or 'op_type', got {kind!r}")
        return self._ops(run_id, kind, pass_)

    @_guarded
    def _ops(self, run_id: int, kind: str, pass_: int | None) -> list[dict[str, Any]]:
        p = self._pass(run_id, pass_)
        return [
            op_stat_row(r)
            for r in self._conn.execute(
                "SELECT name, op_type, provider, calls, time_ms, p50_ms, p99_ms, share, bytes, "
                "gbps, flops, gflops, intensity FROM ops WHERE run_id = ? AND kind = ? AND "
                "pass = ? ORDER BY rank",
                [run_id, kind, p],
            )
        ]

    @_guarded
    def op_events(self, run_id: int, pass_: int | None = None) -> list[dict[str, Any]]:
        """The raw per-inference node rows of a pass, in trace order (stored compactly since
        format v5: `op_nodes` once per run, `op_times` per execution)."""
        cols = (
            "run_index",
            "name",
            "parent",
            "op_type",
            "provider",
            "node_index",
            "start_us",
            "dur_us",
            "self_us",
            "bytes",
            "activation_bytes",
            "parameter_bytes",
            "output_bytes",
            "input_shapes",
            "output_shapes",
        )
        rows = self._conn.execute(
            "SELECT t.run_index, n.name, n.parent, n.op_type, n.provider, n.node_index, "
            "t.start_us, t.dur_us, COALESCE(t.self_us, t.dur_us), "
            "n.activation_bytes + n.parameter_bytes + n.output_bytes, n.activation_bytes, "
            "n.parameter_bytes, n.output_bytes, n.input_shapes, n.output_shapes "
            "FROM op_times t JOIN op_nodes n ON n.run_id = t.run_id AND n.id = t.node "
            "WHERE t.run_id = ? AND t.pass = ? ORDER BY t.seq",
            [run_id, self._pass(run_id, pass_)],
        ).fetchall()
        return [_op_event(dict(zip(cols, r, strict=True))) for r in rows]

    @_guarded
    def profile_trace(self, run_id: int, pass_: int | None = None) -> ProfileTrace:
        """The pass rebuilt as a ProfileTrace, so `engine.measure.op_stats` can recompute
        from it."""
        p = self._pass(run_id, pass_)
        spans = tuple(
            RunSpan(
                req(i, int, "profile_runs.run_index"),
                req(s, float, "start_us"),
                req(d, float, "dur_us"),
            )
            for i, s, d in self._conn.execute(
                "SELECT run_index, start_us, dur_us FROM profile_runs WHERE run_id = ? AND "
                "pass = ? ORDER BY run_index",
                [run_id, p],
            )
        )
        nodes = tuple(
            NodeEvent(
                run_index=e["run_index"],
                name=e["name"],
                op_type=e["op_type"],
                provider=e["provider"],
                start_us=e["start_us"],
                dur_us=e["dur_us"],
                input_shapes=e["input_shapes"],
                output_shapes=e["output_shapes"],
                activation_bytes=e["activation_bytes"],
                parameter_bytes=e["parameter_bytes"],
                output_bytes=e["output_bytes"],
                parent=e["parent"],
                self_us=e["self_us"],
                node_index=e["node_index"],
            )
            for e in self.op_events(run_id, p)
        )
        if any(not 0 <= n.run_index < len(spans) for n in nodes):
            raise ValueError("op_events.run_index outside the profiled runs")
        return ProfileTrace(runs=spans, nodes=nodes)

    def _pass(self, run_id: int, pass_: int | None) -> int:
        if pass_ is not None:
            return pass_
        (last,) = self._conn.execute(
            "SELECT MAX(pass) FROM profiles WHERE run_id = ?", [run_id]
        ).fetchone()
        return -1 if last is None else req(last, int, "profiles.pass")


def _op_event(e: dict[str, Any]) -> dict[str, Any]:
    for key in (
        "run_index",
        "node_index",
        "bytes",
        "activation_bytes",
        "parameter_bytes",
        "output_bytes",
    ):
        e[key] = req(e[key], int, f"op_events.{key}")
    for key in ("start_us", "dur_us", "self_us"):
        e[key] = req(e[key], float, f"op_events.{key}")
    for key in ("name", "op_type", "provider"):
        e[key] = req(e[key], str, f"op_events.{key}")
    e["parent"] = typed(e["parent"], str, "op_events.parent", nullable=True) or ""
    e["input_shapes"] = _shapes(e["input_shapes"], "op_events.input_shapes")
    e["output_shapes"] = _shapes(e["output_shapes"], "op_events.output_shapes")
    return e


@functools.lru_cache(maxsize=4096)
def _shapes(text: object, what: str) -> Shapes:
    """'[["float",[1,3]]]' -> (("float", (1, 3)),), checked entry by entry."""
    out: list[tuple[str, tuple[int, ...]]] = []
    for entry in parse_json(text, list, what) or []:
        if (
            not isinstance(entry, list)
            or len(entry) != 2
            or not isinstance(entry[0], str)
            or not isinstance(entry[1], list)
            or not all(isinstance(d, int) and not isinstance(d, bool) for d in entry[1])
        ):
            raise ValueError(f"{what} holds a malformed shape")
        out.append((entry[0], tuple(entry[1])))
    return tuple(out)


def _int_map(value: dict[str, Any] | None) -> dict[str, int]:
    out = value or {}
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in out.values()):
        raise ValueError("profiles.provider_nodes holds a non-integer count")
    return out


def _lenient_text(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


def _undecodable(exc: sqlite3.OperationalError) -> bool:
    """Python's sqlite3 met a value that is not UTF-8 (read with the strict default, which
    is C-fast; a reader falls back to `_lenient_text` only when a file needs it)."""
    return str(exc).startswith("Could not decode to UTF-8")


def _connect_read_only(p: Path, header: bytes | None) -> tuple[sqlite3.Connection, str | None]:
    """Open without creating anything beside the file. mode=ro, except for a WAL file
    whose -wal or -shm is missing, where SQLite would create them (even read-only): with
    no -wal there is nothing beyond the main file and no writer (a live one keeps both), so
    it opens immutable; a -wal without its -shm is read from a private copy of both. When
    mode=ro fails (typically a WAL file in a read-only folder) the same two ways apply."""
    uri = p.resolve().as_uri() + "?mode=ro"
    wal, shm = Path(f"{p}-wal"), Path(f"{p}-shm")
    try:
        if header is not None and _wal_header(header) and not (wal.exists() and shm.exists()):
            return _private_or_immutable(p, uri)
        return _probe(_connect(uri)), None
    except sqlite3.DatabaseError as first:
        try:
            return _private_or_immutable(p, uri)
        except (sqlite3.DatabaseError, OSError):
            raise corrupt(p, first) from first


def _private_or_immutable(p: Path, uri: str) -> tuple[sqlite3.Connection, str | None]:
    """A private copy of the file and its -wal when there is one with content (and this
    process does not hold the file: reading it raw would drop our own locks, held.py);
    otherwise the file itself, opened immutable (SQLite then takes no locks and creates no
    -wal or -shm)."""
    wal = Path(f"{p}-wal")
    if wal.exists() and wal.stat().st_size > 0 and not held.is_held(p):
        tmpdir = tempfile.mkdtemp(prefix="opscope-session-")
        copy = Path(tmpdir) / "session.opscope"
        shutil.copyfile(p, copy)
        shutil.copyfile(wal, f"{copy}-wal")
        try:
            return _probe(_connect(copy.as_uri() + "?mode=ro")), tmpdir
        except sqlite3.DatabaseError:
            shutil.rmtree(tmpdir, ignore_errors=True)
            raise
    return _probe(_connect(uri + "&immutable=1")), None


def _connect(uri: str) -> sqlite3.Connection:
    # Readers may be handed between threads (a GUI worker); each is used by one at a time.
    return sqlite3.connect(uri, uri=True, check_same_thread=False)


def _probe(conn: sqlite3.Connection) -> sqlite3.Connection:
    try:
        conn.execute("PRAGMA trusted_schema = OFF")  # no side-effecting SQL in its schema
        conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
    except (sqlite3.DatabaseError, UnicodeDecodeError):
        conn.close()
        raise
    return conn


def _readable_version(p: Path, conn: sqlite3.Connection, header: bytes | None) -> int:
    version = schema.known_version(p, conn)
    if version is None:
        tables = schema.other_tables(conn)
        what = "an SQLite database with other tables" if tables else "an empty SQLite database"
        if (
            not tables
            and header is not None
            and _wal_header(header)
            and not Path(f"{p}-wal").exists()
        ):
            what += f"; a session being written keeps its data in {p.name}-wal: copy that too"
        raise SessionFileError(f"not an OpScope session ({what})", p)
    return version


def _wal_header(header: bytes) -> bool:
    """The header's file-format bytes say WAL (2), so recent writes may sit in FILE-wal."""
    return header[18:20] == b"\x02\x02"


def _migrated_in_memory(conn: sqlite3.Connection) -> sqlite3.Connection:
    """An older file's contents, migrated in an in-memory copy (the file is never written)."""
    memory = sqlite3.connect(":memory:", check_same_thread=False)
    conn.backup(memory)
    conn.close()
    schema.migrate(Database(memory))
    return memory


def _close(conn: sqlite3.Connection, tmpdir: str | None, key: held.Key | None = None) -> None:
    try:
        conn.close()
    finally:
        held.release(key)
        if tmpdir:
            shutil.rmtree(tmpdir, ignore_errors=True)


__all__ = ["MarkerRow", "RunRow", "SessionReader", "SweepRow"]
