"""What a serving run recorded, request by request, and the one statistics path that both
the real loop and the simulator go through (so they differ only in their service model).

Every time is in seconds from the run's start. A request's latency runs from its
*scheduled* arrival, not from when it was sent: a generator that fell behind, or a queue
that backed up, shows in the latency (no coordinated omission).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.events import LatencyBatch, ServedRequests, TimingDone
from engine.measure.stats import Throughput, is_stable, latency_stats

OK, REJECTED, TIMED_OUT, UNSERVED = 0, 1, 2, 3
# unserved: it arrived and waited, and the run stopped (a signal) before a batch took it;
# in a file, also a request recorded on arrival whose end the writer never got to record
# (killed): the backlog, never a latency sample
OUTCOMES = ("ok", "rejected", "timed_out", "unserved")


@dataclass
class ServeRecords:
    """Per request (arrays of one length), per batch, and the queue depth over time."""

    scheduled: np.ndarray  # when the request was due
    sent: np.ndarray  # when it reached the server (the simulator: when due)
    dequeued: np.ndarray  # when a batch took it, or it timed out (NaN: hit, rejected)
    done: np.ndarray  # when its response was ready (NaN: rejected, timed out)
    batch: np.ndarray  # batch id (-1: none)
    hit: np.ndarray  # answered by the response cache
    outcome: np.ndarray  # OK, REJECTED, TIMED_OUT, UNSERVED
    batch_start: np.ndarray = field(default_factory=lambda: np.empty(0))
    batch_end: np.ndarray = field(default_factory=lambda: np.empty(0))
    batch_size: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    batch_instance: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))

    @classmethod
    def empty(cls, n: int) -> ServeRecords:
        nan = np.full(n, np.nan)
        return cls(  # every array written now (np.full): a run's resident memory is
            scheduled=np.full(n, 0.0),  # taken when it starts, not as it goes
            sent=nan.copy(),
            dequeued=nan.copy(),
            done=nan.copy(),
            batch=np.full(n, -1, np.int64),
            hit=np.full(n, False),
            outcome=np.full(n, OK, np.int8),
        )

    def __len__(self) -> int:
        return int(self.scheduled.size)

    def check(self) -> None:
        """Nothing is lost: every request sent ended as ok, rejected or timed out, and an
        ok request has a completion time."""
        ok = self.outcome == OK
        if np.isnan(self.done[ok]).any():
            raise AssertionError("a request counted ok has no completion time")


def summarize(
    records: ServeRecords, warmup_s: float = 0.0, slo_ms: float | None = None
) -> dict[str, Any]:
    """The JSON fields every serving run reports (README, `opscope load`); with `slo_ms`
    (the p99 target), goodput: the requests per second served within it, beside the
    throughput, as LLM serving reports it.

    Requests due in the first `warmup_s` seconds are served and counted (`requests` holds
    every request, so completed + rejected + timed_out + unserved = sent) but kept out of
    every other figure: an engine just woken is no steady state, as `opscope bench` discards its
    warm-up."""
    r = records
    steady = r.scheduled >= (r.scheduled.min() + warmup_s if len(r) else 0.0)
    ok = (r.outcome == OK) & steady
    served = ok & ~r.hit
    latency = (r.done[ok] - r.scheduled[ok]) * 1e3
    queue = (r.dequeued[served] - r.sent[served]) * 1e3
    t_steady = float(r.scheduled[steady].min()) if steady.any() else math.inf
    in_steady = r.batch_start >= t_steady
    service = (r.batch_end - r.batch_start)[in_steady] * 1e3
    lat = latency_stats(np.round(latency * 1e6).astype(np.int64))
    sizes = r.batch_size[in_steady]
    hist = Counter(int(s) for s in sizes)
    span = _span(r, steady)
    lateness = (r.sent - r.scheduled)[steady] * 1e3
    lateness = lateness[np.isfinite(lateness)]
    depth_max, depth_p99 = _depth(r, t_steady)
    everything = r.outcome == OK
    return {
        "requests": {
            "sent": len(r),
            "completed": int(everything.sum()),
            "rejected": int((r.outcome == REJECTED).sum()),
            "timed_out": int((r.outcome == TIMED_OUT).sum()),
            "unserved": int((r.outcome == UNSERVED).sum()),
            "cache_hits": int((r.hit & everything).sum()),
            "warmup": int((~steady).sum()),
        },
        "warmup_s": warmup_s,
        "latency_ms": {
            "count": lat.count,
            "mean": lat.mean,
            "p50": lat.p50,
            "p90": lat.p90,
            "p99": lat.p99,
            "max": lat.max,
        },
        "queue_ms": _pcts(queue),
        "service_ms": _pcts(service),
        "batch_size": {
            "count": int(sizes.size),
            "mean": float(sizes.mean()) if sizes.size else math.nan,
            "histogram": {str(k): hist[k] for k in sorted(hist)},
        },
        "throughput": {"requests_per_s": float(ok.sum() / span) if span > 0 else math.nan},
        "queue_depth": {"max": depth_max, "p99": depth_p99},
        "generator": {
            "lateness_p99_ms": float(np.percentile(lateness, 99)) if lateness.size else 0.0,
            "lateness_max_ms": float(lateness.max()) if lateness.size else 0.0,
        },
        "duration_s": span,
        **({"goodput": goodput(latency, slo_ms, span, int(steady.sum()))} if slo_ms else {}),
    }


def goodput(latency_ms: np.ndarray, slo_ms: float, span_s: float, sent: int) -> dict[str, Any]:
    """Requests served within `slo_ms` of their scheduled time: per second and as a share
    of the steady requests sent (a rejected, timed-out or unserved request misses it)."""
    within = int((latency_ms <= slo_ms).sum())
    return {
        "requests_per_s": within / span_s if span_s > 0 else math.nan,
        "share": within / sent if sent else math.nan,
        "count": within,
        "slo_ms": slo_ms,
    }


def _pcts(values_ms: np.ndarray) -> dict[str, float]:
    if values_ms.size == 0:
        return {"p50": math.nan, "p99": math.nan}
    p50, p99 = np.percentile(values_ms, [50, 99])
    return {"p50": float(p50), "p99": float(p99)}


def _span(r: ServeRecords, steady: np.ndarray) -> float:
    """From the first steady arrival to the last response (or the last arrival)."""
    if not steady.any():
        return 0.0
    end = np.nanmax(np.concatenate([r.done[steady], r.scheduled[steady]]))
    return float(end - r.scheduled[steady].min())


def depth_series(r: ServeRecords) -> tuple[np.ndarray, np.ndarray]:
    """Queue depth over time, exactly: +1 when a request joined the queue, -1 when a
    batch took it or it timed out (an unserved one: at the last time recorded). (t, depth
    after the change), in time order."""
    waits = (r.outcome == UNSERVED) & np.isfinite(r.sent) & np.isnan(r.dequeued)
    queued = (np.isfinite(r.dequeued) | waits) & ~r.hit
    # an unserved request waited to the end of what was recorded (a stop, a kill)
    times = [r.sent, r.dequeued, r.done, r.batch_end]
    last = max((float(np.nanmax(t)) for t in times if np.isfinite(t).any()), default=0.0)
    enter, leave = r.sent[queued], np.where(waits, last, r.dequeued)[queued]
    t = np.concatenate([enter, leave])
    step = np.concatenate([np.ones(enter.size, np.int64), -np.ones(leave.size, np.int64)])
    order = np.lexsort((step, t))  # at equal times the leave (-1) comes first
    return t[order], np.cumsum(step[order])


def _depth(r: ServeRecords, since: float = -math.inf) -> tuple[int, float]:
    """Queue depth from `since` on: its maximum, and its time-weighted 99th percentile."""
    t, d = depth_series(r)
    keep = t >= since
    t, d = t[keep], d[keep]
    if d.size == 0:
        return 0, 0.0
    widths = np.diff(np.append(t, t[-1]))
    total = widths.sum()
    if total <= 0:
        return int(d.max()), float(d.max())
    order = np.argsort(d, kind="stable")
    cum = np.cumsum(widths[order]) / total
    p99 = float(d[order][min(int(np.searchsorted(cum, 0.99)), d.size - 1)])
    return int(d.max()), p99


def steady_ok(r: ServeRecords, warmup_s: float) -> np.ndarray:
    """Indices of the requests that completed and were due after the warm-up, in order."""
    start = float(r.scheduled.min()) if len(r) else 0.0
    mask = (r.outcome == OK) & (r.scheduled >= start + warmup_s) & np.isfinite(r.done)
    return np.flatnonzero(mask)


def latency_batch(r: ServeRecords, idx: np.ndarray, origin_ns: int = 0) -> LatencyBatch:
    """These requests as raw samples: start = scheduled time, latency = end to end."""
    starts = np.round(r.scheduled[idx] * 1e9).astype(np.int64)
    lats = np.round((r.done[idx] - r.scheduled[idx]) * 1e9).astype(np.int64)
    return LatencyBatch(starts, lats, origin_ns)


def timing_done(r: ServeRecords, warmup_s: float) -> TimingDone:
    """The run's statistics as a session stores them: end-to-end latency of every request
    after the warm-up, requests per second, stability, and the warm-up count."""
    idx = steady_ok(r, warmup_s)
    lats = np.round((r.done[idx] - r.scheduled[idx]) * 1e9).astype(np.int64)
    steady = r.scheduled >= (float(r.scheduled.min()) if len(r) else 0.0) + warmup_s
    span = _span(r, steady)
    rate = float(idx.size / span) if span > 0 else 0.0
    return TimingDone(
        latency_stats(lats),
        Throughput(rate, rate),
        is_stable(lats) if lats.size else False,
        int((~steady).sum()),
        span,
    )


def served_requests(
    r: ServeRecords,
    idx: np.ndarray,
    batches: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
    first_batch: int = 0,
    origin_ns: int = 0,
    queue: tuple[float, int, int] = (float("nan"), 0, 0),
    waiting: np.ndarray | None = None,
) -> ServedRequests:
    """Requests `idx` (ended) and the batches (arrays of start, end, size, instance) numbered from
    `first_batch`, as the event a session records them from. Without `batches`, every
    batch of `r` (a finished run, the simulator's). `waiting`: requests that arrived and
    wait in the queue, recorded now as UNSERVED (a kill keeps the backlog); a later event
    brings each again with its end."""
    idx = np.asarray(idx, np.int64)
    if waiting is not None and waiting.size:
        return _with_waiting(
            served_requests(r, idx, batches, first_batch, origin_ns, queue), r, waiting
        )
    at_s, queued, peak = queue
    if batches is None:
        start, end = r.batch_start, r.batch_end
        size, inst = r.batch_size, r.batch_instance
    else:  # copies: the loop's arrays are written on
        start, end, size, inst = (np.array(c) for c in batches)
    return ServedRequests(
        index=idx,
        scheduled=r.scheduled[idx],
        sent=r.sent[idx],
        dequeued=r.dequeued[idx],
        done=r.done[idx],
        batch=r.batch[idx],
        hit=r.hit[idx],
        outcome=r.outcome[idx],
        batch_id=np.arange(first_batch, first_batch + len(start), dtype=np.int64),
        batch_start=np.asarray(start, np.float64),
        batch_end=np.asarray(end, np.float64),
        batch_size=np.asarray(size, np.int64),
        batch_instance=np.asarray(inst, np.int64),
        origin_ns=origin_ns,
        at_s=at_s,
        queued=queued,
        queue_peak=peak,
    )


def _with_waiting(ev: ServedRequests, r: ServeRecords, waiting: np.ndarray) -> ServedRequests:
    """`ev` with the waiting requests appended: as they stand on arrival (no dequeue, no
    end, no batch), outcome UNSERVED."""
    w = np.asarray(waiting, np.int64)
    nan = np.full(w.size, np.nan)
    return dataclasses.replace(
        ev,
        index=np.concatenate([ev.index, w]),
        scheduled=np.concatenate([ev.scheduled, r.scheduled[w]]),
        sent=np.concatenate([ev.sent, r.sent[w]]),
        dequeued=np.concatenate([ev.dequeued, nan]),
        done=np.concatenate([ev.done, nan]),
        batch=np.concatenate([ev.batch, np.full(w.size, -1, np.int64)]),
        hit=np.concatenate([ev.hit, np.zeros(w.size, bool)]),
        outcome=np.concatenate([ev.outcome, np.full(w.size, UNSERVED, np.int8)]),
    )
