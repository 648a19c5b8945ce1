"""Runs recorded in another session file (a tune trial run on another machine of a Ray
cluster writes its own; a host over SSH records into one of its own) copied into this
session with new run ids, every table that belongs to a run (samples, profiles, markers,
serving rows...) with them, and the sweeps over them with their run ids renumbered."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path

from engine.errors import SessionFileError, one_line
from engine.files import loads_json
from engine.session import schema
from engine.session.columns import table_info
from engine.session.env import FACTS, MACHINE_PREFIX
from engine.session.store import SessionStore
from engine.session.trust import corrupt


def copy_runs(store: SessionStore, src: Path, paths: Mapping[str, str] | None = None) -> list[int]:
    """Copy every run of `src` into `store`, with its sweeps, memory reports and LLM serving
    studies; returns the new ids, in the source's order. `paths` renames model paths as
    they are here (a host's copy of a model: the file it was sent from). `src` must be a
    session of this version of the format (written by the same OpScope)."""
    try:
        probe = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
        try:
            version = schema.stored_version(probe)
        finally:
            probe.close()
    except (sqlite3.Error, ValueError) as exc:
        raise SessionFileError(f"cannot read the trial's session ({one_line(exc)})", src) from exc
    if version != schema.SCHEMA_VERSION:
        raise SessionFileError(
            f"written by another OpScope (session format {version}, this one "
            f"{schema.SCHEMA_VERSION}): install the same version on every node",
            src,
        )
    conn = store.db.conn
    try:
        conn.execute("ATTACH DATABASE ? AS trial", (str(src),))
        try:
            with store.transaction():
                ids = _copy(conn, dict(paths or {}))
                _note_machines(store, conn)
                return ids
        finally:
            conn.execute("DETACH DATABASE trial")
    except (sqlite3.Error, UnicodeDecodeError) as exc:  # locked, full, or a damaged trial
        cause = corrupt(store.path, exc).message
        raise SessionFileError(f"{cause}, copying the runs of {src}", store.path) from exc


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [c.name for c in table_info(conn, table, "main")]


def _own_key(conn: sqlite3.Connection, table: str) -> str | None:
    """A table's own row id (an INTEGER PRIMARY KEY alone: markers' id), given anew."""
    keys = [c for c in table_info(conn, table, "main") if c.pk]
    alone = len(keys) == 1 and keys[0].type.upper() == "INTEGER" and keys[0].name != "run_id"
    return keys[0].name if alone else None


def _copy(conn: sqlite3.Connection, paths: dict[str, str]) -> list[int]:
    model_cols = ", ".join(_columns(conn, "models"))
    conn.execute(
        f"INSERT OR IGNORE INTO main.models ({model_cols}) SELECT {model_cols} FROM trial.models"
    )
    run_cols = [c for c in _columns(conn, "runs") if c != "id"]
    tables = [
        name
        for (name,) in conn.execute(
            "SELECT name FROM main.sqlite_master WHERE type = 'table' AND name != 'runs'"
        )
        if "run_id" in _columns(conn, name)
    ]
    new_ids: list[int] = []
    renumbered: dict[int, int] = {}
    for (old,) in conn.execute("SELECT id FROM trial.runs ORDER BY id").fetchall():
        cols = ", ".join(run_cols)
        cur = conn.execute(
            f"INSERT INTO main.runs ({cols}) SELECT {cols} FROM trial.runs WHERE id = ?", (old,)
        )
        new = int(cur.lastrowid or 0)
        new_ids.append(new)
        renumbered[int(old)] = new
        for table in tables:
            kept = [c for c in _columns(conn, table) if c != _own_key(conn, table)]
            picked = ", ".join("?" if c == "run_id" else c for c in kept)
            conn.execute(
                f"INSERT INTO main.{table} ({', '.join(kept)}) "
                f"SELECT {picked} FROM trial.{table} WHERE run_id = ?",
                (new, old),
            )
    added = {
        "runs": new_ids,
        "sweeps": _copy_sweeps(conn, renumbered),
        "memory": _copy_rows(conn, "memory"),
        "llm_studies": _copy_rows(conn, "llm_studies"),
    }
    for there, here in paths.items():
        for table, ids in added.items():
            marks = ", ".join("?" * len(ids))
            if ids:
                conn.execute(f"UPDATE main.{table} SET model_path = ? WHERE model_path = ? "
                             f"AND id IN ({marks})", [here, there, *ids])  # fmt: skip
        conn.execute("UPDATE main.models SET path = ? WHERE path = ?", (here, there))
    return new_ids


def _note_machines(store: SessionStore, conn: sqlite3.Connection) -> None:
    """The source's machine (its meta facts) and the machines it names, kept as this
    session's `machine:NAME` facts: the runs copied say where they ran."""
    rows = conn.execute("SELECT key, value FROM trial.meta").fetchall()
    meta = {str(k): v for k, v in rows}
    facts = {k: meta.get(k) for k in FACTS}
    name = meta.get("host")
    if isinstance(name, str) and name:
        store.note_machine(name, facts)
    for key, value in meta.items():
        if key.startswith(MACHINE_PREFIX) and isinstance(value, str):
            try:
                named = loads_json(value)
            except ValueError:
                continue
            if isinstance(named, dict):
                store.note_machine(key[len(MACHINE_PREFIX) :], named)


def _copy_rows(conn: sqlite3.Connection, table: str) -> list[int]:
    """Each row of the source's `table` of rows of their own, not a run's (memory reports,
    LLM serving studies), under a new id; the new ids."""
    cols = ", ".join(c for c in _columns(conn, table) if c != "id")
    ids = []
    for (old,) in conn.execute(f"SELECT id FROM trial.{table} ORDER BY id").fetchall():
        cur = conn.execute(
            f"INSERT INTO main.{table} ({cols}) SELECT {cols} FROM trial.{table} WHERE id = ?",
            (old,),
        )
        ids.append(int(cur.lastrowid or 0))
    return ids


def _copy_sweeps(conn: sqlite3.Connection, renumbered: dict[int, int]) -> list[int]:
    """Each sweep of the source, its points' run ids as they are numbered here; the new
    sweeps' ids."""
    added = []
    cols = [c for c in _columns(conn, "sweeps") if c != "id"]
    for row in conn.execute(f"SELECT {', '.join(cols)} FROM trial.sweeps ORDER BY id").fetchall():
        values = dict(zip(cols, row, strict=True))
        ids = json.loads(values.get("run_ids") or "[]")
        values["run_ids"] = json.dumps([renumbered[int(i)] for i in ids if int(i) in renumbered])
        cur = conn.execute(
            f"INSERT INTO main.sweeps ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [values[c] for c in cols],
        )
        added.append(int(cur.lastrowid or 0))
    return added
