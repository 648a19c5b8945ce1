"""How late the serving loop's threads act on this machine, taken from the real loop's own
records: a request's send after its scheduled time, and the batcher's start after its
delay expired (its timed wait wakes late). Both depend on what the machine was doing: on a
2-vCPU EPYC, one engine thread, a 2-ms delay, the demo CNN's sends were 31-47 us late after
the server had idled under 1 ms and 68-160 us after 5 ms or more (its cores asleep), and
none while every instance was busy (the generator is parked then and the instance that
frees admits what came due, on time); the batcher started 50-100 us after its delay
expired, whatever the load. A single pool of sends timed while batches ran (the
calibration before) put 22-39 us on every request.

So send lateness is kept by the state at the moment it was due (`send_states`): parked
(every instance busy since the generator last looked, so an instance admits the request
when it frees, at its scheduled time), every instance busy with the generator awake (it
slept until the request was due and sends it late: 34-47 us, also while every instance
runs), some busy, or idle since how long; the simulator draws each from its state's.
Classed by the state at the due time alone (every instance busy: none late), the demo
CNN's requests under constant traffic at 85% were 2% right about which were admitted on
time (the generator, awake, looked after a send that came before the batch started) and
80-92% under Poisson and bursts; by the generator's last look, 95-99%.
The batcher's lateness is one pool (`ANY`): by state, the calibration's 2-s runs left 10-18
wake-ups in the states right after a batch, and their medians (80-104 us) stood for the
state, while the loop under constant traffic at 85% woke 56 us late there (p90 73) and the
pool of all states held 63 (p90 112); across traffic and load the loop's own wake-ups
moved 38-61 us at p50 with no order by state."""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import Any

import numpy as np

from engine.errors import OpScopeError
from engine.serve.records import ServeRecords

FULL, RUNNING = -1.0, 0.0  # states: every instance runs a batch; some do
PARKED = -2.0  # every instance has run a batch since the generator last looked
ANY = -math.inf  # one pool for every state
LOOK_S = 40e-6  # when the generator looks, for a request an instance admitted first
IDLE_EDGES = (1e-9, 0.0005, 0.001, 0.002, 0.005, 0.02)  # idle since (s): lower edges
EDGES = (PARKED, FULL, RUNNING, *IDLE_EDGES)
SKIP_S = 0.3  # a run's first requests are not steady state
LEAST = 8  # fewer samples in a state: none kept for it (a nearby state's serve)
MAX_S = 10.0  # a lateness beyond this is no measurement

Lateness = dict[float, np.ndarray]  # a state's lower edge -> lateness samples (s)


def states_at(times: np.ndarray, start: np.ndarray, end: np.ndarray, instances: int) -> np.ndarray:
    """The server's state at each of `times`, given its batches' starts and ends: FULL when
    every instance runs one, RUNNING when some do, else how long since the last ended
    (at least 1e-9; inf before the first)."""
    times = np.asarray(times, dtype=np.float64)
    starts, ends = np.sort(start), np.sort(end)
    started = np.searchsorted(starts, times, "left")  # a batch starting at t: not yet
    ended = np.searchsorted(ends, times, "right")
    running = started - ended
    last = np.where(ended > 0, ends[np.maximum(ended - 1, 0)], -np.inf)
    idle = np.maximum(times - last, 1e-9)
    return np.where(running >= instances, FULL, np.where(running > 0, RUNNING, idle))


def bucketed(late: np.ndarray, states: np.ndarray, least: int = LEAST) -> Lateness:
    """The samples by state bucket, those with `least` samples or more."""
    cell = np.searchsorted(EDGES, states, "right") - 1
    out: Lateness = {}
    for i, edge in enumerate(EDGES):
        got = late[cell == i]
        if got.size >= least:
            out[edge] = got
    return out


def one_pool(parts: list[tuple[np.ndarray, np.ndarray]], least: int = LEAST) -> Lateness:
    """(lateness, states) pairs of several runs as one pool for every state (none when
    fewer than `least` samples)."""
    late = np.concatenate([p[0] for p in parts]) if parts else np.empty(0)
    return {ANY: late} if late.size >= least else {}


def taken_at_once(
    rec: ServeRecords, max_batch: int, preferred: tuple[int, ...], delay_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """Each batch that its instance took the moment its last one ended (every member sent
    by then, and a full, preferred or ripe batch): (the batch before, this one), indices."""
    start, end, size, inst = rec.batch_start, rec.batch_end, rec.batch_size, rec.batch_instance
    if len(start) < 2:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    member = rec.batch >= 0
    first = np.full(len(start), np.inf)
    last = np.full(len(start), -np.inf)
    np.minimum.at(first, rec.batch[member], rec.sent[member])
    np.maximum.at(last, rec.batch[member], rec.sent[member])
    order = np.lexsort((start, inst))
    a, c = order[:-1], order[1:]  # each batch and the next on its instance
    ended = end[a]
    ready = (size[c] >= max_batch) | np.isin(size[c], preferred) | (first[c] + delay_s <= ended)
    took = (inst[a] == inst[c]) & (last[c] <= ended) & ready & (start[c] >= ended)
    return a[took], c[took]


def full_stretches(
    rec: ServeRecords, instances: int, at_once: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """When every instance ran a batch, its turnaround to a batch it took at once counted
    as running (it never waited for work, so a parked generator stayed parked): the
    stretches' starts and ends."""
    end = rec.batch_end.copy()
    end[at_once[0]] = rec.batch_start[at_once[1]]
    times = np.r_[rec.batch_start, end]
    step = np.r_[np.ones(len(end)), -np.ones(len(end))]
    order = np.lexsort((-step, times))  # at the same time a start before an end
    on = np.cumsum(step[order]) >= instances
    was = np.r_[False, on[:-1]]
    return times[order][on & ~was], times[order][~on & was]


def send_states(
    due: np.ndarray,
    look: np.ndarray,
    rec: ServeRecords,
    instances: int,
    at_once: tuple[np.ndarray, np.ndarray],
) -> np.ndarray:
    """The sends' states (`states_at`, and PARKED): the generator sleeps until each
    request is due and looks at the server when it wakes (`look`, the same order as
    `due`); when every instance runs a batch then, it parks, and each request due in that
    stretch after the look is parked: an instance admits it when it frees."""
    states = states_at(due, rec.batch_start, rec.batch_end, instances)
    began, ended = full_stretches(rec, instances, at_once)
    if not began.size:
        return states

    def stretch(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(began, t, "right") - 1
        return np.where((k >= 0) & (t < ended[np.maximum(k, 0)]), k, -1)

    at_look, at_due = stretch(look), stretch(due)
    first = np.full(began.size, np.inf)
    np.minimum.at(first, at_look[at_look >= 0], look[at_look >= 0])
    parked = (at_due >= 0) & (due > first[np.maximum(at_due, 0)])
    return np.where(parked, PARKED, states)


def send_samples(
    rec: ServeRecords, instances: int, max_batch: int, preferred: tuple[int, ...], delay_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """A real open-loop run's sends after SKIP_S: (lateness, state, `send_states`). The
    generator looked when it sent, or about LOOK_S after the due time of a request an
    instance admitted first (sent at its scheduled time)."""
    sent, due = rec.sent, rec.scheduled
    keep = (due >= SKIP_S) & np.isfinite(sent)
    look = np.where(sent > due, sent, due + LOOK_S)[keep]
    at_once = taken_at_once(rec, max_batch, preferred, delay_s)
    states = send_states(due[keep], look, rec, instances, at_once)
    return np.maximum(sent[keep] - due[keep], 0.0), states


def wake_samples(
    rec: ServeRecords, delay_s: float, instances: int
) -> tuple[np.ndarray, np.ndarray]:
    """A real run's batches taken when their oldest request's delay expired (started at or
    after it, an instance free then): (start - expiry, state at the expiry)."""
    if delay_s <= 0 or not len(rec.batch_start):
        return np.empty(0), np.empty(0)
    member = rec.batch >= 0
    first = np.full(len(rec.batch_start), np.inf)
    np.minimum.at(first, rec.batch[member], rec.sent[member])
    due = first + delay_s
    states = states_at(due, rec.batch_start, rec.batch_end, instances)
    took = (rec.batch_start >= due - 1e-12) & (states != FULL) & (due >= SKIP_S)
    return rec.batch_start[took] - due[took], states[took]


def turnaround_samples(
    rec: ServeRecords, max_batch: int, preferred: tuple[int, ...], delay_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """A real run's turnarounds: an instance's next batch after SKIP_S that it took at
    once (`taken_at_once`), from the last one's end to its start: (the ended batch's size,
    seconds). The instance's bookkeeping between batches (recording each member, the next
    pick): on the demo CNN 10 us after a batch of 1, 27 after 2, 48 after 4, 64-68 after 8."""
    a, c = taken_at_once(rec, max_batch, preferred, delay_s)
    keep = rec.batch_start[c] >= SKIP_S
    a, c = a[keep], c[keep]
    return rec.batch_size[a].astype(np.int64), rec.batch_start[c] - rec.batch_end[a]


def by_size(parts: list[tuple[np.ndarray, np.ndarray]], least: int = 5) -> dict[int, np.ndarray]:
    """(sizes, seconds) pairs of several runs: the seconds by size, sizes with `least`."""
    sizes = np.concatenate([p[0] for p in parts])
    secs = np.concatenate([p[1] for p in parts])
    out = {int(n): secs[sizes == n] for n in np.unique(sizes)}
    return {n: v for n, v in out.items() if v.size >= least}


class Draw:
    """Lateness drawn by state: `at(u, state)` with u uniform in [0, 1) takes the samples
    of the largest state edge not above `state` that has samples (of the smallest, below
    them all)."""

    def __init__(self, late: Lateness) -> None:
        self.edges = sorted(late)
        self.samples: list[list[float]] = [late[e].tolist() for e in self.edges]

    def __bool__(self) -> bool:
        return bool(self.edges)

    def at(self, u: float, state: float) -> float:
        pool = self.samples[max(bisect_right(self.edges, state) - 1, 0)]
        return pool[int(u * len(pool))]

    def many(self, rng: np.random.Generator, states: np.ndarray) -> np.ndarray:
        """One draw for each state."""
        idx = np.maximum(np.searchsorted(self.edges, states, "right") - 1, 0)
        out = np.empty(len(states))
        for i, pool in enumerate(self.samples):
            mask = idx == i
            if mask.any():
                out[mask] = rng.choice(np.asarray(pool), int(mask.sum()))
        return out


def to_json(late: Lateness) -> dict[str, list[float]]:
    """{"any" | "parked" | "full" | "running" | idle-since ms: [us, ...]}."""
    name = {ANY: "any", PARKED: "parked", FULL: "full", RUNNING: "running"}
    return {
        name.get(e, f"{e * 1e3:g}"): (v * 1e6).round(3).tolist() for e, v in sorted(late.items())
    }


UNITS = {"us": (1e6, 3), "ms": (1e3, 6)}  # a unit: (per second, decimals: to the ns)


def sizes_to_json(by: dict[int, np.ndarray], unit: str = "us") -> dict[str, list[float]]:
    """{batch size: [seconds in `unit`, ...]}."""
    per_s, decimals = UNITS[unit]
    return {str(n): (v * per_s).round(decimals).tolist() for n, v in sorted(by.items())}


def sizes_from_json(
    data: Any, what: str, unit: str = "us", most: float = MAX_S
) -> dict[int, np.ndarray]:
    """{batch size: [seconds in `unit`, ...]} from untrusted JSON, in seconds (each in
    [0, `most`))."""
    per_s = UNITS[unit][0]
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise OpScopeError(f"calibration data is malformed ({what}: not an object)")
    out: dict[int, np.ndarray] = {}
    for key, values in data.items():
        try:
            n = int(key)
            v = np.asarray([float(x) for x in values], dtype=np.float64) / per_s
        except (TypeError, ValueError) as exc:
            raise OpScopeError(f"calibration data is malformed ({what}: {exc})") from exc
        if n < 1 or v.size == 0 or not np.all((v >= 0) & (v < most)):
            raise OpScopeError(f"calibration data is malformed ({what}: size {key!r})")
        out[n] = v
    return out


def from_json(data: Any, what: str) -> Lateness:
    """From untrusted JSON: known states, samples in [0, MAX_S)."""
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise OpScopeError(f"calibration data is malformed ({what}: not an object)")
    out: Lateness = {}
    for key, values in data.items():
        try:
            state = {"any": ANY, "parked": PARKED, "full": FULL, "running": RUNNING}.get(str(key))
            if state is None:
                state = float(key) / 1e3
                if not (math.isfinite(state) and state > 0):
                    raise ValueError(f"state {key!r}")
            v = np.asarray([float(x) for x in values], dtype=np.float64) / 1e6
        except (TypeError, ValueError) as exc:
            raise OpScopeError(f"calibration data is malformed ({what}: {exc})") from exc
        if v.size == 0 or not np.all((v >= 0) & (v < MAX_S)):
            raise OpScopeError(f"calibration data is malformed ({what}: samples)")
        out[state] = v
    return out
