"""Pareto fronts: the trials no other trial beats on every objective at once."""

from __future__ import annotations

from collections.abc import Sequence


def front(points: Sequence[Sequence[float]], maximize: Sequence[bool]) -> list[int]:
    """Indices of the non-dominated points (NaN never dominates nor is on the front).
    `maximize[j]` says whether objective j is better larger."""
    signed = [[v if up else -v for v, up in zip(p, maximize, strict=True)] for p in points]
    keep: list[int] = []
    for i, p in enumerate(signed):
        if any(v != v for v in p):  # NaN
            continue
        dominated = False
        for j, q in enumerate(signed):
            if i == j or any(v != v for v in q):
                continue
            if all(b >= a for a, b in zip(p, q, strict=True)) and any(
                b > a for a, b in zip(p, q, strict=True)
            ):
                dominated = True
                break
        if not dominated:
            keep.append(i)
    return keep
