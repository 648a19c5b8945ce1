"""The simulator's per-request records, built at the end from what its event loops keep:
the loops do not write per-request fields as they go (three list writes per request, then
a list-to-array copy each, were a third of a run), only the order in which requests joined
the FIFO queue and which runs of that order each batch took or each timeout dropped."""

from __future__ import annotations

import numpy as np

from engine.serve.records import OK, REJECTED, TIMED_OUT, ServeRecords


class Trail:
    """What an event loop keeps: per batch (start, end, size, instance, queue position of
    its first request), per timeout drop (position, count, time), hits and rejections."""

    def __init__(self) -> None:
        self.start: list[float] = []
        self.end: list[float] = []
        self.size: list[int] = []
        self.instance: list[int] = []
        self.first: list[int] = []
        self.drop_first: list[int] = []
        self.drop_count: list[int] = []
        self.drop_time: list[float] = []
        self.hits: list[int] = []
        self.rejected: list[int] = []

    def records(self, sched: np.ndarray, joined: np.ndarray | None) -> ServeRecords:
        """Records of the requests `sched` (their arrival times), `joined[p]` being the
        request at queue position p (None: request p, every request joined in order)."""
        n = sched.size
        start, end = np.asarray(self.start, np.float64), np.asarray(self.end, np.float64)
        size = np.asarray(self.size, np.int64)
        order = np.arange(n) if joined is None else joined
        batch_of = np.repeat(np.arange(size.size), size)
        pos = _runs(np.asarray(self.first, np.int64), size)
        req = order[pos]
        bat = np.full(n, -1, np.int64)
        bat[req] = batch_of
        deq = np.full(n, np.nan)
        done = np.full(n, np.nan)
        deq[req] = start[batch_of]
        done[req] = end[batch_of]
        out = np.full(n, OK, np.int8)
        count = np.asarray(self.drop_count, np.int64)
        dropped = order[_runs(np.asarray(self.drop_first, np.int64), count)]
        out[dropped] = TIMED_OUT
        deq[dropped] = np.repeat(np.asarray(self.drop_time, np.float64), count)
        hits = np.asarray(self.hits, np.int64)
        hit = np.zeros(n, bool)
        hit[hits] = True
        done[hits] = sched[hits]  # a hit is answered when it arrives
        out[np.asarray(self.rejected, np.int64)] = REJECTED
        return ServeRecords(
            scheduled=sched.copy(),
            sent=sched.copy(),
            dequeued=deq,
            done=done,
            batch=bat,
            hit=hit,
            outcome=out,
            batch_start=start,
            batch_end=end,
            batch_size=size,
            batch_instance=np.asarray(self.instance, np.int64),
        )


def _runs(first: np.ndarray, count: np.ndarray) -> np.ndarray:
    """The positions first[r], first[r] + 1, ..., first[r] + count[r] - 1 of every run r."""
    total = int(count.sum())
    if not total:
        return np.zeros(0, np.int64)
    offsets = np.cumsum(count) - count
    return np.repeat(first - offsets, count) + np.arange(total)
