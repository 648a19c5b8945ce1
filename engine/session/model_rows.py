"""The models a session's runs ran (`models`, keyed by the hash of their files), read as
`ModelRow`, declared once (engine/session/spec.py)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from engine.model.info import ModelInfo
from engine.session.spec import Column, RecordSpec
from engine.session.trust import json_text
from engine.session.writable import utc_now


@dataclass(frozen=True, slots=True)
class ModelRow:
    sha256: str
    name: str | None
    path: str | None
    file_bytes: int | None
    inputs: list[Any]  # ValueInfo.to_json() each
    outputs: list[Any]
    info: dict[str, Any]  # ModelInfo.to_json()
    first_seen: str | None  # ISO 8601 UTC


def _or_empty(empty: type) -> Any:
    return lambda value: empty() if value is None else value


MODELS: RecordSpec[ModelRow] = RecordSpec(
    "models",
    (
        Column("sha256", str),
        Column("name", str, nullable=True),
        Column("path", str, nullable=True),
        Column("file_bytes", int, nullable=True),
        Column("inputs", list, then=_or_empty(list)),
        Column("outputs", list, then=_or_empty(list)),
        Column("info", dict, then=_or_empty(dict)),
        Column("first_seen", str, nullable=True),
    ),
    ModelRow,
)


def read_models(conn: sqlite3.Connection) -> list[ModelRow]:
    return MODELS.read_all(conn, order="ORDER BY first_seen, sha256")


def upsert_model(conn: sqlite3.Connection, info: ModelInfo) -> str:
    """The model's row (its first_seen kept when it has one); returns the sha256."""
    MODELS.upsert(
        conn,
        key=("sha256",),
        keep=("first_seen",),
        sha256=info.sha256,
        name=info.name,
        path=info.path,
        file_bytes=info.file_bytes,
        inputs=json_text([v.to_json() for v in info.inputs]),
        outputs=json_text([v.to_json() for v in info.outputs]),
        info=json_text(info.to_json()),
        first_seen=utc_now(),
    )
    return info.sha256
