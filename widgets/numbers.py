"""Numbers as the window prints them: three significant digits, never an exponent for the
magnitudes a latency or a rate takes ('9,630', '96.3', '0.963'), a dash for a missing one."""

from __future__ import annotations

import math

MISSING = "–"


def figure(value: float | None, digits: int = 3) -> str:
    """`digits` significant digits below 10**digits, whole numbers with separators above
    ('9.63e+03' from a '.3g' format read as a typo in a table of milliseconds)."""
    if value is None or not math.isfinite(value):
        return MISSING
    if abs(value) >= 10**digits:
        return f"{value:,.0f}"
    if value != 0 and abs(value) < 10 ** -(digits + 1):
        return f"{value:.{digits - 1}e}"
    text = f"{value:.{digits}g}"
    return text if "e" not in text else f"{value:,.0f}"  # 999.6 rounds up to 1e+03
