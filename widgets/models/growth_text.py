"""A sweep's growth exponents in words, Qt-free (the Scaling dock's legend and status line):
k with its error bar from the fit and the points' spread ('2.71 ± 0.15'), and the flags
that make one doubtful (points that did not grow, an error that spans a power)."""

from __future__ import annotations

import math
from typing import Any


def k_text(fit: dict[str, Any] | None, k: float | None = None) -> str:
    """'2.71 ± 0.15'; '2.71 ± ?' without an error bar; 'n/a' without a fit (`k`: the bare
    exponent of a sweep stored before fits carried errors)."""
    value = (fit or {}).get("k", k)
    if value is None or not math.isfinite(float(value)):
        return "n/a"
    err = (fit or {}).get("err")
    spread = f"{float(err):.2f}" if err is not None and math.isfinite(float(err)) else "?"
    return f"{float(value):.2f} ± {spread}"


def flags_of(fit: dict[str, Any] | None) -> list[str]:
    return [str(f) for f in (fit or {}).get("flags") or []]


def flagged_text(growth: dict[str, Any], order: list[str], most: int = 3) -> str:
    """The doubtful fits in words, the total first and then in `order` (the heaviest op
    types first), each with its first flag, at most `most` of them: 'total (not monotonic:
    0.41 at 128, 0.41 at 256), MatMul (±0.76 spans a whole power: ...) and 6 more' ("" when
    none is doubtful)."""
    fits = growth.get("fits") or {}
    names = list(dict.fromkeys(["total", *order, *sorted(fits)]))
    doubtful = [n for n in names if flags_of(fits.get(n))]
    said = ", ".join(f"{n} ({flags_of(fits[n])[0]})" for n in doubtful[:most])
    more = len(doubtful) - most
    return said + (f" and {more} more (opscope sweep prints each)" if more > 0 else "")
