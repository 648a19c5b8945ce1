"""Where each run came from, and the one label every run list and picker shows for it.

A run's `kind` is its measurement (bench, profile, live, load, simulate, generate): what
`compare`'s like-for-like rule matches on. Its origin is who made it: a tune's trial (an
`opscope bench` run, kind bench), a sweep's point (kind profile), a gate's candidate run (kind
bench), or the kind itself for a run a person started (live, load, a bench typed at the
command line). Since format v9 the writer records it with the run (`runs.origin`, JSON:
`{"job": "tune", "tune": KEY, "trial": 7}`, `{"job": "sweep", "dim": "batch", "value": "4"}`
or `{"job": "gate", "gate": KEY, "repeat": 2}`); the numbers are the file's: tunes and gates
in the order their first run was recorded, sweeps by their `sweeps.id`.
A file from before v9 (or without the column) reads its sweep points from the sweeps'
recorded run ids, and every other run as its kind.

The file may come from anyone: each field is checked and bounded, and one that is not
what the writer writes reads as no origin (the kind). The label is plain text; each
printer escapes it its own way.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from engine.session.trust import json_text

MAX_CHARS = 1024  # a stored origin's JSON text
MAX_FIELD = 64  # a dim, a value or a tune's key
MAX_RUN_IDS = 1_000_000  # characters of a sweep's run ids read for its points' origin
MAX_TRIAL = 10**9  # a tune's trial, a gate's repeat
FIELDS = ("job", "tune", "trial", "dim", "value", "gate", "repeat")  # those read, all of them
_OTHER = object()  # a stored field of another JSON type than the writer's


@dataclass(frozen=True, slots=True)
class Origin:
    """Who made a run: `job` "tune", "sweep" or "gate", else the run's own kind."""

    job: str
    number: int | None = None  # the tune's, the sweep's or the gate's number in the file
    trial: int | None = None  # a tune's trial number
    point: str = ""  # a sweep's point: "batch=4"
    repeat: int | None = None  # a gate's candidate run: 1 to its --runs

    @property
    def label(self) -> str:
        """'tune 2, trial 7', 'sweep 1, batch=4', 'gate 1, repeat 2', or the kind: 'live',
        'load', 'bench'."""
        if self.job == "tune":
            head = "tune" if self.number is None else f"tune {self.number}"
            return head if self.trial is None else f"{head}, trial {self.trial}"
        if self.job == "gate":
            head = "gate" if self.number is None else f"gate {self.number}"
            return head if self.repeat is None else f"{head}, repeat {self.repeat}"
        if self.job == "sweep":
            head = "sweep" if self.number is None else f"sweep {self.number}"
            return f"{head}, {self.point}" if self.point else head
        return self.job

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "number": self.number,
            "trial": self.trial,
            "point": self.point or None,
            "repeat": self.repeat,
            "label": self.label,
        }


def label(origin: Origin | None, kind: str) -> str:
    """The one text every run list and picker shows for where a run came from."""
    return origin.label if origin is not None else kind


# -- writing -------------------------------------------------------------------------


def new_tune_key() -> str:
    """A tune's key, the same in each of its trials' origins (the file numbers tunes); a
    gate's, the same in each of its candidate runs'."""
    return secrets.token_hex(6)


def tune_origin(key: str, trial: int) -> dict[str, Any]:
    return {"job": "tune", "tune": key, "trial": trial}


def sweep_origin(dim: str, value: object) -> dict[str, Any]:
    return {"job": "sweep", "dim": str(dim)[:MAX_FIELD], "value": str(value)[:MAX_FIELD]}


def gate_origin(key: str, repeat: int) -> dict[str, Any]:
    """A gate's candidate run `repeat` (1 to its --runs), of the gate `key`."""
    return {"job": "gate", "gate": key, "repeat": repeat}


def write_origin(conn: sqlite3.Connection, run_id: int, origin: dict[str, Any]) -> None:
    """Record `origin` on run `run_id` (in the caller's transaction: with the run's row)."""
    conn.execute("UPDATE runs SET origin = ? WHERE id = ?", [json_text(origin), run_id])


# -- reading -------------------------------------------------------------------------


def read_origins(conn: sqlite3.Connection, runs: Iterable[tuple[int, str]]) -> dict[int, Origin]:
    """Each run's origin, by id, for `runs` given as (id, kind): stored, else a sweep's
    point by the sweeps' run ids, else the kind. Tunes and gates are numbered over the whole
    file."""
    stored = _stored(conn)
    numbers: dict[str, dict[str, int]] = {"tune": {}, "gate": {}}  # job -> key -> number
    for run_id in sorted(stored):
        job = stored[run_id]["job"]
        key = stored[run_id].get(job)
        if job in numbers and isinstance(key, str) and key not in numbers[job]:
            numbers[job][key] = len(numbers[job]) + 1
    sweeps = _sweep_points(conn)
    out: dict[int, Origin] = {}
    for run_id, kind in runs:
        s = stored.get(run_id)
        in_sweep = sweeps.get(run_id)
        if s is not None and s["job"] == "tune":
            out[run_id] = Origin("tune", numbers["tune"][s["tune"]], s["trial"])
        elif s is not None and s["job"] == "gate":
            number = numbers["gate"].get(s["gate"]) if s["gate"] is not None else None
            out[run_id] = Origin("gate", number, repeat=s["repeat"])
        elif s is not None and s["job"] == "sweep":
            point = f"{s['dim']}={s['value']}"
            out[run_id] = Origin("sweep", in_sweep[0] if in_sweep else None, point=point)
        elif in_sweep is not None:
            out[run_id] = Origin("sweep", in_sweep[0], point=in_sweep[1])
        else:
            out[run_id] = Origin(kind)
    return out


def _has_column(conn: sqlite3.Connection, table: str, column: str) -> bool:
    return any(name == column for _, name, *_ in conn.execute(f"PRAGMA table_info({table})"))


def _stored(conn: sqlite3.Connection) -> dict[int, dict[str, Any]]:
    """run id -> its stored origin, checked (those that are not what a writer writes are
    left out: they read as their kind). SQLite's JSON functions pick the fields, each of
    the JSON type a writer writes (cheaper than json.loads per row on a 3,000-run file:
    bench/run_origins_cost.py)."""
    if not _has_column(conn, "runs", "origin"):  # a file edited by hand, or a foreign tool
        return {}
    fields = ", ".join(f"json_type(origin, '$.{k}'), json_extract(origin, '$.{k}')" for k in FIELDS)
    rows = conn.execute(
        f"SELECT id, {fields} FROM runs WHERE origin IS NOT NULL AND length(origin) <= ? "
        "AND json_valid(origin) AND json_type(origin) = 'object'",
        [MAX_CHARS],
    )
    out = {}
    for run_id, *typed in rows:
        found = {  # a field left out is absent; one of another JSON type is not the writer's
            k: value if kind == ("integer" if k in ("trial", "repeat") else "text") else _OTHER
            for k, kind, value in zip(FIELDS, typed[::2], typed[1::2], strict=True)
            if kind is not None
        }
        checked = _checked(found)
        if isinstance(run_id, int) and checked is not None:
            out[run_id] = checked
    return out


def _checked(value: dict[str, Any]) -> dict[str, Any] | None:
    """The origin a writer writes, from its fields of the right JSON type; else None."""
    job = value.get("job")
    if job == "tune":
        key, trial = value.get("tune"), value.get("trial")
        if _field(key) and isinstance(trial, int) and 0 <= trial <= MAX_TRIAL:
            return {"job": "tune", "tune": key, "trial": trial}
    elif job == "sweep":
        dim, at = value.get("dim"), value.get("value")
        if _field(dim) and _field(at):
            return {"job": "sweep", "dim": dim, "value": at}
    elif job == "gate":  # its key and repeat may be left out: "gate"
        key, repeat = value.get("gate"), value.get("repeat")
        known = repeat is None or (isinstance(repeat, int) and 0 < repeat <= MAX_TRIAL)
        if (key is None or _field(key)) and known:
            return {"job": "gate", "gate": key, "repeat": repeat}
    return None


def _field(v: object) -> bool:
    return isinstance(v, str) and 0 < len(v) <= MAX_FIELD and v.isprintable()


def _sweep_points(conn: sqlite3.Connection) -> dict[int, tuple[int, str]]:
    """run id -> (its sweep's id, 'dim=value' or '') from the sweeps' recorded run ids
    (format v3 on; the first sweep that names a run keeps it)."""
    if not _has_column(conn, "sweeps", "run_ids"):
        return {}
    rows = conn.execute(
        "SELECT id, dim, run_ids, CASE WHEN json_valid(result) "
        "THEN json_extract(result, '$.vary.values') END FROM sweeps ORDER BY id"
    )
    out: dict[int, tuple[int, str]] = {}
    for sweep_id, dim, run_ids, values in rows:
        ids = _json_list(run_ids)
        if not isinstance(sweep_id, int) or ids is None:
            continue
        points = _json_list(values)
        named = points is not None and len(points) == len(ids) and _field(dim)
        for i, run_id in enumerate(ids):
            if not isinstance(run_id, int) or isinstance(run_id, bool) or run_id in out:
                continue
            at = str(points[i]) if named and points is not None else ""
            out[run_id] = (sweep_id, f"{dim}={at}" if at and _field(at) else "")
    return out


def _json_list(text: object) -> list[Any] | None:
    if not isinstance(text, str) or len(text) > MAX_RUN_IDS:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, list) else None
