"""The JSON stored in a session's columns, checked field by field (a session may come
from anyone): serving set-ups (traffic, batching, cache, calibration), run configs and
inputs, and the figures shown as they were recorded (summaries, answers).

A set-up drives computation (a replay, the report's batch histogram), so a field of the
wrong type or out of its bounds there is a ValueError naming it, which the reader turns
into one line. Figures are only shown: a number out of bounds there reads as null (shown
"-"). The bounds are engine/session/columns.py's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from engine.session.columns import COUNT, INT64, MAX_BATCH, SECONDS

FIGURE_LIMIT = 1e15  # |x| of any number in a figure; beyond it reads as null
MAX_LIST = 1_000_000  # entries of a list in a set-up (calibration samples)


@dataclass(frozen=True, slots=True)
class Num:
    kind: type  # int or float (an int passes as float)
    lo: float
    hi: float


@dataclass(frozen=True, slots=True)
class Text:
    chars: int = 4096


@dataclass(frozen=True, slots=True)
class Flag:
    pass


@dataclass(frozen=True, slots=True)
class Seq:
    item: Spec
    most: int = MAX_LIST


@dataclass(frozen=True, slots=True)
class Keyed:
    """An object whose keys are sizes (calibration: "1", "2", "4") -> values of `item`."""

    item: Spec
    most: int = 64


Spec = Num | Text | Flag | Seq | Keyed | dict[str, "Spec"]

SIZE = Num(int, 1, MAX_BATCH)
MS = Num(float, 0.0, 1e7)

TRAFFIC: dict[str, Spec] = {
    "kind": Text(64),
    "spec": Text(4096),
    "rate": Num(float, 0.0, 1e9),
    "base": Num(float, 0.0, 1e9),
    "peak": Num(float, 0.0, 1e9),
    "period_s": Num(float, 0.0, SECONDS),
    "duty": Num(float, 0.0, 1.0),
    "start_rate": Num(float, 0.0, 1e9),
    "end_rate": Num(float, 0.0, 1e9),
    "path": Text(8192),
    "clients": Num(int, 1, 1e6),
    "closed_loop": Flag(),
    "seed": Num(int, -INT64, INT64),
    "duration_s": Num(float, 0.0, SECONDS),
    "requests": Num(int, 0, COUNT),
}
BATCHING: dict[str, Spec] = {
    "max_batch": SIZE,
    "preferred": Seq(SIZE, 64),
    "delay_ms": MS,
    "queue_limit": Num(int, 0, 1e9),
    "timeout_ms": MS,
    "instances": Num(int, 1, 1024),
}
CACHE: dict[str, Spec] = {
    "size": Num(int, 0, 1e9),
    "repeat": Num(float, 0.0, 1.0),
    "hit_rate": Num(float, 0.0, 1.0),
}
CALIBRATION: dict[str, Spec] = {
    "sizes": Seq(SIZE, 64),
    "samples_ms": Keyed(Seq(MS)),
    "median_ms": Keyed(MS),
    "send_lateness_us": Seq(Num(float, 0.0, 1e7)),
}
CONFIG: dict[str, Spec] = {
    "batch": SIZE,
    "threads": Num(int, 0, 65536),
    "min_cosine": Num(float, 0.0, 1.0),
}


def checked(
    value: dict[str, Any], spec: dict[str, Spec], what: str, *, nulls: bool = True
) -> dict[str, Any]:
    """`value` with every field `spec` names checked; a null is left out, as missing (with
    `nulls`; otherwise an error: OpScope never writes one there, so a NaN was stored);
    fields it does not name pass unchecked. ValueError naming the first bad field."""
    out = dict(value)
    for key, field in spec.items():
        if key in out:
            if out[key] is None:
                if not nulls:
                    raise ValueError(f"{what}.{key} is null (not a number)")
                del out[key]
            else:
                _check(out[key], field, f"{what}.{key}")
    return out


def _check(value: object, spec: Spec, what: str) -> None:
    if isinstance(spec, Num):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{what} is not a number")
        if spec.kind is int and not isinstance(value, int):
            raise ValueError(f"{what} is not a whole number")
        if not (isinstance(value, int) or math.isfinite(value)) or not (
            spec.lo <= value <= spec.hi
        ):
            raise ValueError(f"{what} is out of range ({value:.6g}; {spec.lo:g} to {spec.hi:g})")
    elif isinstance(spec, Text):
        if not isinstance(value, str) or len(value) > spec.chars:
            raise ValueError(f"{what} is not text of at most {spec.chars} characters")
    elif isinstance(spec, Flag):
        if not isinstance(value, bool):
            raise ValueError(f"{what} is not true or false")
    elif isinstance(spec, Seq):
        if not isinstance(value, list) or len(value) > spec.most:
            raise ValueError(f"{what} is not a list of at most {spec.most:,} entries")
        for i, item in enumerate(value):
            _check(item, spec.item, f"{what}[{i}]")
    elif isinstance(spec, Keyed):
        if not isinstance(value, dict) or len(value) > spec.most:
            raise ValueError(f"{what} is not an object of at most {spec.most} sizes")
        for key, item in value.items():
            if not key.isdigit() or not 1 <= int(key) <= MAX_BATCH:
                raise ValueError(f"{what} has a key {key[:20]!r} that is not a batch size")
            _check(item, spec.item, f"{what}[{key}]")
    elif not isinstance(value, dict):
        raise ValueError(f"{what} is not an object")
    else:
        checked(value, spec, what)


def figures(value: Any) -> Any:
    """Recorded figures as shown: a number that is not finite or beyond FIGURE_LIMIT
    reads as null; everything else as stored (JSON nesting is bounded by the parser)."""
    if isinstance(value, dict):
        return {k: figures(v) for k, v in value.items()}
    if isinstance(value, list):
        return [figures(v) for v in value]
    if isinstance(value, float) and not (math.isfinite(value) and abs(value) <= FIGURE_LIMIT):
        return None
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > FIGURE_LIMIT:
        return None
    return value


def stored_config(text: object, what: str) -> Any:
    """A run config stored as JSON (`sweeps.config`, `memory.config`): None when NULL or
    too long, else a checked `RunConfig`; ValueError naming `what` when it is invalid."""
    from engine.config import RunConfig
    from engine.errors import ConfigError
    from engine.session.trust import parse_json

    raw = parse_json(text, dict, what)
    if raw is None:
        return None
    try:
        return RunConfig.from_json(checked(raw, CONFIG, what))
    except (ConfigError, ValueError) as exc:
        raise ValueError(f"{what} is invalid ({exc})") from exc
