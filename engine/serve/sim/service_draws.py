"""Service times as the simulator's event loops draw them: plain Python lists they index
inline (a call per batch, a million times, is what costs), and the calibrated extras
(the idle slowdown) as one function called only when a model has them."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

from engine.serve.sim.lateness import Draw
from engine.serve.sim.service import IDLE_FROM_S, ServiceModel

DRAWS = 1 << 20  # uniform draws cycled through (a cycle of 1M batches)
REACH = 7920  # batch k reads draws[k] and, for the idle slowdown, draws[k + REACH - 1]
WAKE = REACH // 2  # and for the batcher's lateness before it, draws[k + WAKE]
TURN = REACH // 4  # and for its instance's turnaround after it, draws[k + TURN]

# (size, batch number, start time s, time drawn s, idle s) -> the batch's time s
Adjust = Callable[[int, int, float, float, float], float]
# (batch number, the server's state when the delay expires) -> how late the batcher wakes s
WakeLate = Callable[[int, float], float]
# (size, batch number, the size of its instance's batch before, idle s) -> its time s
Pick = Callable[[int, int, int, float], float]


class ServiceDraws:
    """The `k`-th batch, of `size`, takes `table[size][int(draws[k % len(draws)] *
    lens[size])]`, then `adjust` (when not None), then at least 1e-7 s. With `stretches`
    (multipliers drawn from the calibrated slow-stretch process, one per batch), the table
    is each size's median and the k-th batch is multiplied by `stretches[k]`.

    `adjust`: a batch that starts after the server was idle for `idle` seconds (no batch
    running since the last one ended) is slowed by a ratio drawn for the longest
    calibrated pause not longer than that.

    `wake_late` (None when not calibrated): how late the batcher takes the `k`-th batch
    after its oldest request's delay expired, drawn for the server's state then
    (sim/lateness.py: RUNNING, or idle since how long).

    `pick` (None when not calibrated, or with `stretches`): the k-th batch's time drawn by
    the size of its instance's batch before: a batch right after a larger one draws from
    the samples timed after a larger one, else from those after one of its size or
    smaller; one after the server idled IDLE_FROM_S or more, from all its size's (the idle
    slowdown's ratios are to those). The loops keep each instance's last size.

    `turn` (None when not calibrated): for each size, the instance's turnarounds after a
    batch of that size (its bookkeeping before it can take the next): the samples of the
    nearest measured size below (above, for sizes below them all), scaled in proportion
    to the size (the bookkeeping is per request: 10 us after 1 on the demo CNN, 64-68
    after 8); the k-th batch's is `turn[size][int(draws[k + TURN] * turn_lens[size])]`."""

    def __init__(
        self,
        service: ServiceModel,
        max_batch: int,
        draws: list[float],
        stretches: list[float] | None = None,
    ) -> None:
        self.table = service.table(max_batch)
        if stretches is not None:  # each batch: its size's median times its multiplier
            self.table = [[sorted(t)[len(t) // 2]] if t else t for t in self.table]
        self.lens = [len(t) for t in self.table]
        self.draws = draws
        slowdown = service.slowdown_table(max_batch)
        n = len(draws)

        def adjust(size: int, k: int, _start: float, took: float, idle: float) -> float:
            gaps, slow = slowdown[size]
            if gaps and idle >= gaps[0]:
                ratios = slow[bisect_right(gaps, idle) - 1]
                took *= ratios[int(draws[(k + REACH - 1) % n] * len(ratios))]
            return took

        self.pick: Pick | None = None
        if stretches is None and service.after_larger and service.after_same:
            table, larger = self.table, service.table(max_batch, "larger")
            same = service.table(max_batch, "same")

            def pick(size: int, k: int, before: int, idle: float) -> float:
                if idle >= IDLE_FROM_S:
                    row = table[size]
                else:
                    row = larger[size] if before > size else same[size]
                return row[int(draws[k % n] * len(row))]

            self.pick = pick
        self.turn: list[list[float]] | None = None
        self.turn_lens: list[int] = []
        if service.turnaround:
            measured = sorted(service.turnaround)
            self.turn = [[0.0]]
            for size in range(1, max_batch + 1):
                base = measured[max(bisect_right(measured, size) - 1, 0)]
                self.turn.append((service.turnaround[base] * (size / base)).tolist())
            self.turn_lens = [len(t) for t in self.turn]
        wake = Draw(service.wake_late)
        self.wake_late: WakeLate | None = None
        if wake:
            at = wake.at

            def wake_late(k: int, state: float) -> float:
                return at(draws[(k + WAKE) % n], state)

            self.wake_late = wake_late

        calibrated = any(gaps for gaps, _ in slowdown)
        self.adjust: Adjust | None = adjust if calibrated else None
        if stretches is not None:
            idle_adjust, m = self.adjust, len(stretches)

            def stretched(size: int, k: int, start: float, took: float, idle: float) -> float:
                took *= stretches[k % m]
                return idle_adjust(size, k, start, took, idle) if idle_adjust else took

            self.adjust = stretched
