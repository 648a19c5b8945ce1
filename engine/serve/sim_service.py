"""Service times as the simulator's event loops draw them: plain Python lists they index
inline (a call per batch, a million times, is what costs), and the calibrated extras
(idle slowdown, cost per arrival) as one function called only when a model has them."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable

from engine.serve.service import ServiceModel

DRAWS = 1 << 20  # uniform draws cycled through (a cycle of 1M batches)

# (size, batch number, time so far, idle s, start, arrivals or None, first arrival index)
Adjust = Callable[[int, int, float, float, float, "list[float] | None", int], float]


class ServiceDraws:
    """The `k`-th batch, of `size`, takes `table[size][int(draws[k % len(draws)] *
    lens[size])]`, then `adjust` (when not None), then at least 1e-7 s.

    `adjust`: a batch that starts after the server was idle for `idle` seconds (no batch
    running since the last one ended) is slowed by a ratio drawn for the longest
    calibrated pause not longer than that; each request in `sched` (from index `lo`) that
    arrives while it runs adds the calibrated cost of an arrival."""

    def __init__(self, service: ServiceModel, max_batch: int, draws: list[float]) -> None:
        self.table = service.table(max_batch)
        self.lens = [len(t) for t in self.table]
        self.draws = draws
        slowdown = service.slowdown_table(max_batch)
        per_arrival = service.arrival_costs(max_batch)
        n = len(draws)

        def adjust(
            size: int,
            k: int,
            took: float,
            idle: float,
            t: float,
            sched: list[float] | None,
            lo: int,
        ) -> float:
            gaps, slow = slowdown[size]
            if gaps and idle >= gaps[0]:
                ratios = slow[bisect_right(gaps, idle) - 1]
                took *= ratios[int(draws[(k + 7919) % n] * len(ratios))]
            cost = per_arrival[size]
            if cost and sched is not None:
                took += cost * (bisect_left(sched, t + took, lo) - lo)
            return took

        calibrated = any(gaps for gaps, _ in slowdown) or any(per_arrival)
        self.adjust: Adjust | None = adjust if calibrated else None
