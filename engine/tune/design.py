"""How the search within a budget spends it, and what it knows of a space's shape: numeric
knobs (batch, threads) are ordered, so a search can learn "more is better"; a spread start
covers the space before the sampler learns; the last trials try the untried neighbours of
the best config found (one knob one step away), which closes the last few percent.
A config is a key: the index of each knob's value in the space, in the space's order."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.tune.space import Space

Key = tuple[int, ...]


@dataclass(frozen=True)
class Design:
    """The search's choices (bench/tune_search.py --variants compares them on replays). The
    default, the best of those on the demo models' measurements: a maximin start of a
    quarter of the budget, TPE, then half the budget on the best config's neighbours."""

    ordinal: bool = True  # numeric knobs as ordered integers, not unordered categories
    multivariate: bool = True  # TPE models the knobs jointly (group: by the knobs it saw)
    startup: int | None = None  # TPE's random start; None: max(2, min(budget // 2, 5))
    spread: float = 0.25  # share of the budget: a maximin start before TPE
    refine: float = 0.5  # share of the budget, the last trials: neighbours of the best
    sampler: str = "tpe"  # tpe | random (the baseline every design should beat)
    near_top: int = 1  # refinement pools the untried neighbours of this many best configs

    def counts(self, budget: int) -> tuple[int, int]:
        """The spread start's and the refinement's trials within `budget`."""
        return round(self.spread * budget), round(self.refine * budget)


def ordinal_knobs(space: Space) -> set[str]:
    """The knobs whose values are all numbers (not bools), three or more of them."""
    return {
        k
        for k, values in space.items()
        if len(values) > 2
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
    }


def ranks(space: Space, knob: str) -> list[int]:
    """Each value's place when the knob's values are sorted (for an ordered knob)."""
    order = sorted(range(len(space[knob])), key=lambda i: space[knob][i])
    out = [0] * len(order)
    for rank, i in enumerate(order):
        out[i] = rank
    return out


def _distance(space: Space, ordered: set[str], a: Key, b: Key) -> float:
    d = 0.0
    for k, i, j in zip(space, a, b, strict=True):
        if k in ordered:
            r = ranks(space, k)
            d += abs(r[i] - r[j]) / (len(r) - 1)
        else:
            d += float(i != j)
    return d


def spread_start(
    space: Space, ordered: set[str], n: int, taken: set[Key], rng: random.Random
) -> list[Key]:
    """`n` configs far apart (each the farthest from those before it, ties at random; the
    first at random): every value of a category and both ends of a range are tried soon."""
    every = [k for k in itertools.product(*(range(len(v)) for v in space.values()))]
    chosen: list[Key] = []
    for _ in range(n):
        left = [k for k in every if k not in taken and k not in chosen]
        if not left:
            break
        if not chosen:
            chosen.append(rng.choice(left))
            continue
        near = [min(_distance(space, ordered, k, c) for c in chosen) for k in left]
        far = max(near)
        chosen.append(rng.choice([k for k, d in zip(left, near, strict=True) if d == far]))
    return chosen


def neighbours(space: Space, ordered: set[str], key: Key) -> list[Key]:
    """The configs one knob away: the next value up or down of an ordered knob, any other
    value of a category."""
    out: list[Key] = []
    for pos, k in enumerate(space):
        if k in ordered:
            r = ranks(space, k)
            steps = [i for i in range(len(r)) if abs(r[i] - r[key[pos]]) == 1]
        else:
            steps = [i for i in range(len(space[k])) if i != key[pos]]
        out += [(*key[:pos], i, *key[pos + 1 :]) for i in steps]
    return out


def to_params(space: Space, ordered: set[str], key: Key) -> dict[str, Any]:
    """A key as the sampler's parameters: an ordered knob's rank, a category's index."""
    return {k: ranks(space, k)[i] if k in ordered else i for k, i in zip(space, key, strict=True)}


def from_params(space: Space, ordered: set[str], params: dict[str, Any]) -> Key:
    out = []
    for k in space:
        v = int(params[k])
        out.append(ranks(space, k).index(v) if k in ordered else v)
    return tuple(out)


def predictor(
    space: Space, ordered: set[str], seen: dict[Key, Any], goal: Any
) -> Callable[[Key], float]:
    """A guess at a config's standing, lower better, from the trials run so far: a ridge
    fit of their rank by loss (feasible ones, 0 best .. 1 worst) on each knob's value (and
    an ordered knob's place, so an untried larger batch continues the trend), plus 1 when
    every trial run with one of its values missed the floor."""
    import numpy as np

    def features(key: Key) -> list[float]:
        out: list[float] = []
        for k, i in zip(space, key, strict=True):
            out += [float(i == j) for j in range(len(space[k]))]
            if k in ordered:
                out.append(ranks(space, k)[i] / (len(space[k]) - 1))
        return out

    ok = sorted((k for k, t in seen.items() if goal.feasible(t)), key=lambda k: goal.loss(seen[k]))
    beta = None
    if len(ok) >= 2:
        x = np.array([features(k) for k in ok])
        y = np.arange(len(ok)) / (len(ok) - 1)
        mean = y.mean()
        beta = np.linalg.solve(x.T @ x + np.eye(x.shape[1]), x.T @ (y - mean))
    missed: dict[tuple[int, int], list[bool]] = {}
    for k, t in seen.items():
        for pos, i in enumerate(k):
            missed.setdefault((pos, i), []).append(not goal.feasible(t))

    def guess(key: Key) -> float:
        fit = float(np.array(features(key)) @ beta + mean) if beta is not None else 0.5
        doomed = any(all(missed.get((pos, i), [False])) for pos, i in enumerate(key))
        return fit + float(doomed)

    return guess
