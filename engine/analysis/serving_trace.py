"""A serving run (kinds load and simulate) as Chrome trace events: every batch as a
complete slice on a thread per model instance, the queue depth as a counter track, and
the requests that were rejected or timed out as instant events.

Times (ts, dur) are µs from the schedule's start; pid is the run id, like the profiled
runs' tracks of engine/analysis/export.py. A big run is cut at MAX_BATCHES batches (and
the counter and instants at the time the last kept batch ended), and the cut is said
in `otherData` and by the export command.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.analysis.run_summary import summarize
from engine.serve.records import REJECTED, TIMED_OUT, ServeRecords, depth_series
from engine.session.rows import RunRow
from engine.session.serving_rows import ServingRun

MAX_BATCHES = 200_000
MAX_INSTANTS = 100_000
MAX_COUNTER = 400_000  # queue-depth points; above, each run of points keeps its peak and end
REQUESTS_TID = 0  # the thread of the rejected / timed-out instants; instance i is tid i + 1


@dataclass(frozen=True)
class ServingTrace:
    events: list[dict[str, Any]]
    notes: list[str]  # what was cut, one line each


def _us(seconds: np.ndarray) -> list[float]:
    values: list[float] = np.round(seconds * 1e6, 3).tolist()
    return values


def serving_trace_events(run: RunRow, s: ServingRun) -> ServingTrace:
    """The run's track: process and thread names, batch slices, the queue-depth counter,
    rejected and timed-out instants, and the end of the warm-up."""
    r = s.records
    pid = run.id
    notes: list[str] = []
    what = "SIMULATED" if s.simulated else "served under load"
    spec = s.traffic.get("spec") or s.traffic.get("kind") or "?"
    events: list[dict[str, Any]] = [
        _meta("process_name", pid, 0, {"name": f"{summarize(run).label} [{what}: {spec}]"}),
        _meta("process_sort_index", pid, 0, {"sort_index": run.id}),
    ]
    n = int(r.batch_start.size)
    keep = min(n, MAX_BATCHES)
    if keep < n:
        notes.append(
            f"run {run.id}: {n} batches; the trace keeps the first {keep} (and the queue "
            "depth and requests up to the end of the last one kept)"
        )
    horizon = float(np.max(r.batch_end[:keep])) if keep < n and keep else np.inf
    instances = sorted({int(i) for i in np.unique(r.batch_instance[:keep])})
    for i in instances:
        events.append(_meta("thread_name", pid, i + 1, {"name": f"instance {i}"}))
        events.append(_meta("thread_sort_index", pid, i + 1, {"sort_index": i + 1}))
    events.extend(_batches(r, keep, pid))
    events.extend(_depth(r, horizon, pid, run.id, notes))
    events.extend(_failures(r, horizon, pid, run.id, notes))
    if s.warmup_s > 0 and len(r):
        events.append(
            {
                "ph": "i",
                "s": "p",
                "name": "warm-up ends",
                "cat": "serving",
                "pid": pid,
                "tid": REQUESTS_TID,
                "ts": round((float(np.nanmin(r.scheduled)) + s.warmup_s) * 1e6, 3),
                "args": {"warmup_s": s.warmup_s},
            }
        )
    return ServingTrace(events, notes)


def _batches(r: ServeRecords, keep: int, pid: int) -> list[dict[str, Any]]:
    ids = r.batch[(r.batch >= 0) & (r.batch < keep)]
    requests = np.bincount(ids, minlength=keep)[:keep].tolist() if keep else []
    start, end = r.batch_start[:keep], r.batch_end[:keep]
    ts, dur = _us(start), _us(np.maximum(end - start, 0.0))
    sizes, inst = r.batch_size[:keep].tolist(), r.batch_instance[:keep].tolist()
    return [
        {
            "ph": "X",
            "name": f"batch of {size}",
            "cat": "batch",
            "pid": pid,
            "tid": instance + 1,
            "ts": t,
            "dur": d,
            "args": {"batch": b, "size": size, "requests": n},
        }
        for b, (t, d, size, instance, n) in enumerate(
            zip(ts, dur, sizes, inst, requests, strict=True)
        )
    ]


def _depth(
    r: ServeRecords, horizon: float, pid: int, run_id: int, notes: list[str]
) -> list[dict[str, Any]]:
    """The queue depth after every change (one value per instant: the last change at
    that time), starting from 0; thinned, keeping every peak, beyond MAX_COUNTER."""
    t, d = depth_series(r)
    inside = t <= horizon
    t, d = t[inside], d[inside]
    if t.size:
        last = np.append(t[1:] != t[:-1], True)  # the final value at each time
        t, d = t[last], d[last]
    if t.size > MAX_COUNTER:
        t, d = _thin(t, d, MAX_COUNTER // 2)
        notes.append(
            f"run {run_id}: the queue depth changed too often to draw every change; "
            "the counter keeps, for each short stretch, its peak and its last value"
        )
    first = float(np.nanmin(r.scheduled)) if len(r) else 0.0
    points = [(round(min(first, float(t[0])) * 1e6, 3) if t.size else 0.0, 0)]
    points += zip(_us(t), d.tolist(), strict=True)
    return [
        {
            "ph": "C",
            "name": "queue",
            "cat": "queue",
            "pid": pid,
            "tid": REQUESTS_TID,
            "ts": ts,
            "args": {"depth": depth},
        }
        for ts, depth in points
    ]


def _thin(t: np.ndarray, d: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Cut the points into `groups` runs of consecutive points; keep each run's peak and
    last point (in time order), so the maximum and where the depth settles both stay."""
    edges = np.linspace(0, t.size, groups + 1).astype(np.int64)
    starts, ends = edges[:-1], edges[1:] - 1
    peaks = starts + np.array([np.argmax(d[a : b + 1]) for a, b in zip(starts, ends, strict=True)])
    keep = np.unique(np.concatenate([peaks, ends]))
    return t[keep], d[keep]


def _failures(
    r: ServeRecords, horizon: float, pid: int, run_id: int, notes: list[str]
) -> list[dict[str, Any]]:
    """A rejected request at the time it was turned away, a timed-out one when it gave up."""
    rejected = np.flatnonzero(r.outcome == REJECTED)
    timed_out = np.flatnonzero(r.outcome == TIMED_OUT)
    when = np.concatenate([r.sent[rejected], r.dequeued[timed_out]])
    due = np.concatenate([r.scheduled[rejected], r.scheduled[timed_out]])
    index = np.concatenate([rejected, timed_out])
    names = ["rejected"] * rejected.size + ["timed out"] * timed_out.size
    when = np.where(np.isfinite(when), when, due)
    order = np.argsort(when, kind="stable")
    order = order[when[order] <= horizon]
    if order.size > MAX_INSTANTS:
        notes.append(
            f"run {run_id}: {order.size} rejected or timed-out requests; the trace "
            f"keeps the first {MAX_INSTANTS}"
        )
        order = order[:MAX_INSTANTS]
    if order.size == 0:
        return []
    events: list[dict[str, Any]] = [
        _meta("thread_name", pid, REQUESTS_TID, {"name": "requests rejected or timed out"})
    ]
    ts, late = _us(when[order]), _us(when[order] - due[order])
    for k, t, waited in zip(order.tolist(), ts, late, strict=True):
        events.append(
            {
                "ph": "i",
                "s": "t",
                "name": names[k],
                "cat": "request",
                "pid": pid,
                "tid": REQUESTS_TID,
                "ts": t,
                "args": {"request": int(index[k]), "since_due_us": waited},
            }
        )
    return events


def _meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "ts": 0, "args": args}
