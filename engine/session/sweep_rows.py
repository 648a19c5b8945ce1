"""Sweeps read back (`opscope sweep --session`, schema v3): each row's result JSON is
checked field by field (types, finite numbers), because a session may come from anyone.
A malformed row raises ValueError naming the sweep and the field; the reader turns it
into one line."""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass
from typing import Any

from engine.config import RunConfig
from engine.session import blobs
from engine.session.spec import Column, RecordSpec

STATUSES = ("complete", "partial")
MAX_POINTS = 10_000  # more than any real sweep; bounds the work on a hostile file
MAX_SIZE = 2**53  # a point's size (or its shape's elements)


@dataclass(frozen=True, slots=True)
class SweepPointRow:
    """One size of a sweep: its value (a size, or a shape "AxB"), the size the fit used,
    the median latency and each op type's time (ms per inference)."""

    value: int | str
    size: float
    latency_ms: float  # NaN when the point was not timed
    samples: int
    op_types_ms: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "size": self.size,
            "latency_ms": self.latency_ms,
            "samples": self.samples,
            "op_types": self.op_types_ms,
        }


@dataclass(frozen=True, slots=True)
class SweepRow:
    """One recorded sweep: time ~ size^k fitted for the total and per op type."""

    id: int
    created_at: str | None
    model_path: str | None
    dim: str
    config: RunConfig | None
    status: str  # "complete" | "partial" (interrupted; the points done)
    points: tuple[SweepPointRow, ...]
    growth_total: float  # k of the total; NaN when not fitted (fewer than two points)
    growth: dict[str, float]  # op type -> k
    run_ids: tuple[int, ...]  # the runs its points recorded, in point order

    @property
    def values(self) -> list[int | str]:
        return [p.value for p in self.points]

    def ranked_growth(self) -> list[tuple[str, float]]:
        """Op types by k, largest first (unfitted ones last)."""
        return sorted(self.growth.items(), key=lambda kv: -kv[1] if math.isfinite(kv[1]) else 9e9)

    def to_json(self) -> dict[str, Any]:
        """Like `opscope sweep --json`, with the row's id, model, config and status."""
        return {
            "id": self.id,
            "created_at": self.created_at,
            "model_path": self.model_path,
            "status": self.status,
            "config": self.config.to_json() if self.config else None,
            "run_ids": list(self.run_ids),
            "vary": {"dim": self.dim, "values": self.values},
            "points": [p.to_json() for p in self.points],
            "growth": {"total": self.growth_total, "op_types": self.growth},
        }


SWEEPS: RecordSpec[dict[str, Any]] = RecordSpec(
    "sweeps",
    (
        Column("id", int),
        Column("created_at", str, nullable=True),
        Column("model_path", str, nullable=True),
        Column("dim", str),
        Column("config", str, nullable=True),  # checked as a RunConfig below
        Column("result", dict),  # `SweepResult.to_json()`, checked below
        Column("run_ids", list),
        Column("status", str),
    ),
)


def read_sweeps(conn: sqlite3.Connection) -> list[SweepRow]:
    """Every sweep, oldest first."""
    return [_sweep(r) for r in conn.execute(SWEEPS.select(order="ORDER BY id")).fetchall()]


def _sweep(r: tuple[Any, ...]) -> SweepRow:
    sweep_id = SWEEPS.value(r, "id")
    try:
        return _checked(SWEEPS.values(r))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"sweep {sweep_id}: {exc}") from exc


def _checked(v: dict[str, Any]) -> SweepRow:
    config: RunConfig | None = blobs.stored_config(v["config"], "sweeps.config")
    status = v["status"]
    if status not in STATUSES:
        raise ValueError(f"sweeps.status {status!r} is not complete or partial")
    result = v["result"] or {}
    points = result.get("points")
    if not isinstance(points, list) or len(points) > MAX_POINTS:
        raise ValueError("sweeps.result.points is not a list of points")
    growth = result.get("growth", {})
    if not isinstance(growth, dict):
        raise ValueError("sweeps.result.growth is not an object")
    ids = v["run_ids"] or []
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise ValueError("sweeps.run_ids holds a value that is not a run id")
    return SweepRow(
        id=v["id"],
        created_at=v["created_at"],
        model_path=v["model_path"],
        dim=v["dim"],
        config=config,
        status=status,
        points=tuple(_point(p, i) for i, p in enumerate(points)),
        growth_total=_number(growth.get("total"), "growth.total", nullable=True),
        growth=_op_map(growth.get("op_types", {}), "growth.op_types", nullable=True),
        run_ids=tuple(ids),
    )


def _point(p: object, i: int) -> SweepPointRow:
    what = f"point {i}"
    if not isinstance(p, dict):
        raise ValueError(f"{what} is not an object")
    value = p.get("value")
    if (
        isinstance(value, bool)
        or not isinstance(value, int | str)
        or (isinstance(value, int) and not 0 < value <= MAX_SIZE)
        or (isinstance(value, str) and len(value) > 64)
    ):
        raise ValueError(f"{what}.value is not a size or a shape")
    size = p.get("size")
    size_f = _size_of(value, what) if size is None else _number(size, f"{what}.size")
    if not size_f > 0:
        raise ValueError(f"{what}.size is not positive")
    if size_f > MAX_SIZE:
        raise ValueError(f"{what}.size is larger than {MAX_SIZE}")
    samples = p.get("samples", 0)
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 0:
        raise ValueError(f"{what}.samples is not a count")
    return SweepPointRow(
        value=value,
        size=size_f,
        latency_ms=_number(p.get("latency_ms"), f"{what}.latency_ms", nullable=True),
        samples=samples,
        op_types_ms=_op_map(p.get("op_types", {}), f"{what}.op_types"),
    )


def _size_of(value: int | str, what: str) -> float:
    """The size the fit used, from the value: the size itself, or a shape's elements."""
    if isinstance(value, int):
        return float(value)
    try:
        return float(math.prod(int(x) for x in value.lower().split("x")))
    except (ValueError, OverflowError):
        raise ValueError(f"{what}.value {value[:40]!r} is not a shape like 1x128") from None


def _op_map(value: object, what: str, nullable: bool = False) -> dict[str, float]:
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not an object")
    return {str(k): _number(v, f"{what}[{str(k)[:40]!r}]", nullable) for k, v in value.items()}


def _number(value: object, what: str, nullable: bool = False) -> float:
    """A finite JSON number (null: NaN, where allowed)."""
    if value is None and nullable:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} is not a number")
    if not math.isfinite(value):
        raise ValueError(f"{what} is not a finite number")
    return float(value)
