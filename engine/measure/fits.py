"""Cost curves fitted to measured times: a + b*L + c*L^2 with non-negative terms (a
prefill against its prompt length), a pass that continues a prompt against its tokens and
the tokens before them, and a line through the origin's neighbourhood."""

from __future__ import annotations

import itertools

import numpy as np


def nonnegative_fit(
    cols: dict[str, np.ndarray], y: np.ndarray, weights: np.ndarray | None = None
) -> dict[str, float]:
    """y ~ sum of coef * column with every coef >= 0 (a cost does not shrink as its
    measure grows): the best of the least-squares fits over every subset of the columns
    that comes out non-negative (each residual times `weights`, when given); the terms
    left out are 0. None fits: the first column at the smallest y."""
    w = np.ones_like(y) if weights is None else weights
    names = list(cols)
    best: tuple[float, dict[str, float]] = (np.inf, {names[0]: float(np.min(y))})
    for size in range(len(names), 0, -1):
        for subset in itertools.combinations(names, size):
            x = np.stack([cols[k] for k in subset], axis=1)
            coef, *_ = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)
            if np.any(coef < 0):
                continue
            err = float(np.sum(((x @ coef - y) * w) ** 2))
            if err < best[0]:
                best = (err, dict(zip(subset, map(float, coef), strict=True)))
    return {k: best[1].get(k, 0.0) for k in names}


def fit_prefill(lengths: np.ndarray, ms: np.ndarray) -> tuple[float, float, float]:
    """a + b*L + c*L^2 with a, b, c >= 0 (`nonnegative_fit`, unweighted)."""
    t = nonnegative_fit({"a": np.ones_like(lengths), "b": lengths, "c": lengths**2}, ms)
    return t["a"], t["b"], t["c"]


def fit_continuing(
    tokens: np.ndarray, done: np.ndarray, ms: np.ndarray
) -> tuple[float, float, float, float]:
    """A pass of k more tokens of a prompt whose first `done` are cached: a + b*k +
    c*k*(done + k) (each new token's scores against every token so far) + d*done (the
    cached keys and values read), every term >= 0, each residual relative to its time (the
    short passes weigh as much as the long)."""
    t = nonnegative_fit(
        {"a": np.ones_like(tokens), "b": tokens, "c": tokens * (done + tokens), "d": done},
        ms,
        1.0 / np.maximum(ms, 1e-9),
    )
    return t["a"], t["b"], t["c"], t["d"]


def fit_slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares line y ~ base + slope*x with the slope kept at 0 or more (a step does
    not get cheaper with more context); (slope, base)."""
    if x.size < 2 or float(np.ptp(x)) == 0.0:
        return 0.0, float(np.mean(y)) if y.size else float("nan")
    slope, base = np.polyfit(x, y, 1)
    if slope < 0:
        return 0.0, float(np.mean(y))
    return float(slope), float(base)
