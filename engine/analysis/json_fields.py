"""Values read from a session's JSON figures (untrusted): a field that is not what it
should be reads as missing (NaN, None, {}), never as a crash."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def mapping(d: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    v = d.get(key)
    return v if isinstance(v, Mapping) else {}


def number(v: Any) -> float:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan


def whole(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None
