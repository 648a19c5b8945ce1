"""Cost curves fitted to measured times: a + b*L + c*L^2 with non-negative terms (a
prefill against its prompt length), and a line through the origin's neighbourhood."""

from __future__ import annotations

import numpy as np


def fit_prefill(lengths: np.ndarray, ms: np.ndarray) -> tuple[float, float, float]:
    """a + b*L + c*L^2 with a, b, c >= 0 (a cost does not shrink with length): the best of
    the least-squares fits over every subset of the terms that comes out non-negative."""
    cols = {"a": np.ones_like(lengths), "b": lengths, "c": lengths**2}
    best: tuple[float, dict[str, float]] = (np.inf, {"a": float(np.min(ms)), "b": 0.0, "c": 0.0})
    for subset in (("a", "b", "c"), ("a", "b"), ("a", "c"), ("b", "c"), ("b",), ("c",), ("a",)):
        x = np.stack([cols[k] for k in subset], axis=1)
        coef, *_ = np.linalg.lstsq(x, ms, rcond=None)
        if np.any(coef < 0):
            continue
        err = float(np.sum((x @ coef - ms) ** 2))
        if err < best[0]:
            best = (err, dict(zip(subset, map(float, coef), strict=True)))
    terms = best[1]
    return terms.get("a", 0.0), terms.get("b", 0.0), terms.get("c", 0.0)


def fit_slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares line y ~ base + slope*x with the slope kept at 0 or more (a step does
    not get cheaper with more context); (slope, base)."""
    if x.size < 2 or float(np.ptp(x)) == 0.0:
        return 0.0, float(np.mean(y)) if y.size else float("nan")
    slope, base = np.polyfit(x, y, 1)
    if slope < 0:
        return 0.0, float(np.mean(y))
    return float(slope), float(base)
