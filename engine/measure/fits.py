"""Cost curves fitted to measured times: a + b*L + c*L^2 with non-negative terms (a
prefill against its prompt length), a pass that continues a prompt against its tokens and
the tokens before them, a line through the origin's neighbourhood, and a growth exponent
(time ~ size^k) with its uncertainty and the checks that say when it means nothing."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

MEANINGLESS_ERR = 0.5  # k +- 2 err spans a whole power (linear against quadratic): no answer
FLAT = 0.01  # a next size within 1% of the time before (or below it) did not grow


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


@dataclass(frozen=True)
class PowerFit:
    """k of y ~ x^k (least squares on log-log) and its standard error: from the fit's
    residuals (three points or more) and from each point's own spread over repeats (its
    relative standard error), combined; NaN where neither is known. `flags` say, in words,
    what makes k doubtful: sizes whose time did not grow, an error that spans a power."""

    k: float
    err: float
    err_fit: float
    err_spread: float
    flags: tuple[str, ...] = ()

    def text(self) -> str:
        """'2.71 +- 0.15', '0.51 +- ? (2 points, no repeats)', 'n/a'."""
        if math.isnan(self.k):
            return "n/a"
        return f"{self.k:.2f} ± {self.err:.2f}" if math.isfinite(self.err) else f"{self.k:.2f} ± ?"

    def to_json(self) -> dict[str, Any]:
        def num(v: float) -> float | None:
            return v if math.isfinite(v) else None

        return {"k": num(self.k), "err": num(self.err), "err_fit": num(self.err_fit),
                "err_spread": num(self.err_spread), "flags": list(self.flags)}  # fmt: skip


def power_fit(
    x: Sequence[float] | np.ndarray,
    y: Sequence[float] | np.ndarray,
    rel_err: Sequence[float] | None = None,
    fitted: Sequence[bool] | None = None,
    labels: Sequence[str] | None = None,
) -> PowerFit:
    """k of y ~ x^k over the points `fitted` marks (all by default), its standard error
    (`rel_err`: each y's relative standard error over repeats, NaN where unknown), and
    flags: every point (fitted or not) is checked for growth over the size before it."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    rel = np.full(xs.shape, np.nan) if rel_err is None else np.asarray(rel_err, dtype=float)
    use = np.ones(xs.shape, bool) if fitted is None else np.asarray(fitted, dtype=bool)
    names = list(labels) if labels is not None else [f"{v:g}" for v in xs]
    ok = np.isfinite(xs) & np.isfinite(ys) & (xs > 0) & (ys > 0)
    flags = _not_growing(xs, ys, ok, names)
    pick = ok & use
    lx, ly = np.log(xs[pick]), np.log(ys[pick])
    if lx.size < 2 or np.unique(lx).size < 2:
        return PowerFit(math.nan, math.nan, math.nan, math.nan, tuple(flags))
    dx = lx - lx.mean()
    sxx = float(np.sum(dx**2))
    k = float(np.sum(dx * (ly - ly.mean())) / sxx)
    err_fit = math.nan
    if lx.size > 2:
        resid = ly - ly.mean() - k * dx
        err_fit = math.sqrt(float(np.sum(resid**2)) / (lx.size - 2) / sxx)
    spread = rel[pick]
    err_spread = (
        math.sqrt(float(np.sum((dx / sxx) ** 2 * spread**2)))
        if np.all(np.isfinite(spread))
        else math.nan
    )
    known = [e for e in (err_fit, err_spread) if math.isfinite(e)]
    err = math.sqrt(sum(e * e for e in known)) if known else math.nan
    if not known:
        flags.append(f"no error bar: {lx.size} points and no repeats")
    elif err >= MEANINGLESS_ERR:
        flags.append(f"±{err:.2f} spans a whole power: k means nothing here")
    return PowerFit(k, err, err_fit, err_spread, tuple(flags))


def _not_growing(xs: np.ndarray, ys: np.ndarray, ok: np.ndarray, names: list[str]) -> list[str]:
    """'not monotonic: 0.41 at 128, 0.41 at 256' for the sizes whose time did not grow."""
    order = [i for i in np.argsort(xs, kind="stable") if ok[i]]
    flat = [(a, b) for a, b in itertools.pairwise(order)
            if xs[b] > xs[a] and ys[b] <= ys[a] * (1 + FLAT)]  # fmt: skip
    said = [f"{ys[a]:.3g} at {names[a]}, {ys[b]:.3g} at {names[b]}" for a, b in flat]
    return ["not monotonic: " + "; ".join(said)] if flat else []
