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


MAX_COUNT = 2**53  # beyond it a float could not have held the count exactly


def count(v: Any) -> int | None:
    """A count of things (requests sent, cache hits): a whole number from 0 up, else None
    (`true` is not 1 request, -100 is not a number of requests)."""
    n = whole(v)
    return n if n is not None and 0 <= n <= MAX_COUNT else None


def count_text(v: Any) -> str:
    """A count as a table shows it: '1,214'; '-' when the file has none; a value that is
    no count says so ("- (not a count: -100)"): a hostile or edited file printed
    "requests sent -100"."""
    n = count(v)
    if n is not None:
        return f"{n:,}"
    if v is None:
        return "-"
    return f"- (not a count: {str(v)[:24]})"
