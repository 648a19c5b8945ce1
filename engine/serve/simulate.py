"""A discrete-event simulator of the serving loop: the same traffic schedule, the same
batcher rules (`batching.take`), the same response cache and the same statistics as the
real loop; only the service model differs (batch times drawn from a calibration).

Two event loops share the rules: a general one (response cache, queue limit, closed-loop
clients) that handles each request, and a fast one for open-loop traffic without cache
or queue limit, where the FIFO queue is a range of the sorted arrivals and the work per
batch does not grow with the batch. Tests check they agree.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right
from collections import deque

import numpy as np

from engine.serve.batching import BatchPolicy, take
from engine.serve.cache import ResponseCache
from engine.serve.records import OK, REJECTED, TIMED_OUT, ServeRecords
from engine.serve.service import ServiceModel
from engine.serve.traffic import Schedule

INF = math.inf
DRAWS = 1 << 20  # uniform draws cycled through (a cycle of 1M batches)


def simulate(
    schedule: Schedule,
    policy: BatchPolicy,
    service: ServiceModel,
    *,
    cache_size: int = 0,
    closed_clients: int = 0,
    closed_requests: int = 0,
    seed: int = 0,
) -> ServeRecords:
    """Simulate serving `schedule` (or, with `closed_clients`, that many clients sending
    `closed_requests` in all, content keys from `schedule.keys`)."""
    rng = np.random.default_rng(seed)
    draws = rng.random(DRAWS).tolist()  # uniform; a batch of k takes table[k][int(u * len)]
    svc = _Service(service, policy.max_batch, draws)
    due = schedule.times
    if service.send_lateness.size and not closed_clients and len(schedule):
        # requests reach the server as late as the calibrated sender was: in arrival order
        arrive = due + rng.choice(service.send_lateness, len(schedule))
        order = np.argsort(arrive, kind="stable")
        sizes = schedule.sizes[order] if schedule.sizes is not None else None
        schedule = Schedule(arrive[order], schedule.keys[order], sizes)
        due = due[order]
    if closed_clients or cache_size or policy.queue_limit:
        rec = _general(schedule, policy, svc, cache_size, closed_clients, closed_requests)
    else:
        rec = _fast(schedule, policy, svc)
    if not closed_clients:
        rec.scheduled = due.copy()  # latency runs from the scheduled time
    return rec


class _Service:
    """Service times drawn for the event loops: a batch of k that starts after the server
    was idle for `idle` seconds (no batch running since the last one ended) takes a
    back-to-back sample of size k times a slowdown drawn for the longest calibrated pause
    not longer than that, plus the calibrated cost of each request arriving meanwhile.
    `draw` is a closure over locals: it runs once per batch, up to a million times."""

    def __init__(self, service: ServiceModel, max_batch: int, draws: list[float]) -> None:
        table = service.table(max_batch)
        slowdown = service.slowdown_table(max_batch)
        per_arrival = service.arrival_costs(max_batch)
        n = len(draws)
        state = [0]

        def draw(
            size: int, idle: float, t: float, sched: list[float] | None = None, lo: int = 0
        ) -> float:
            """One batch's time, starting at `t`; each request in `sched` (from index
            `lo`) that arrives while it runs slows it by the calibrated cost."""
            k = state[0]
            state[0] = k + 1
            tk = table[size]
            took = tk[int(draws[k % n] * len(tk))]
            gaps, slow = slowdown[size]
            if gaps and idle >= gaps[0]:
                ratios = slow[bisect_right(gaps, idle) - 1]
                took *= ratios[int(draws[(k + 7919) % n] * len(ratios))]
            cost = per_arrival[size]
            if cost and sched is not None:
                took += cost * (bisect_left(sched, t + took, lo) - lo)
            return took if took > 1e-7 else 1e-7

        self.draw = draw


class _Batches:
    """Batches as four growing lists (start, end, size, instance)."""

    def __init__(self) -> None:
        self.start: list[float] = []
        self.end: list[float] = []
        self.size: list[int] = []
        self.instance: list[int] = []

    def add(self, start: float, end: float, size: int, instance: int) -> int:
        self.start.append(start)
        self.end.append(end)
        self.size.append(size)
        self.instance.append(instance)
        return len(self.size) - 1

    def into(self, rec: ServeRecords) -> ServeRecords:
        rec.batch_start = np.asarray(self.start)
        rec.batch_end = np.asarray(self.end)
        rec.batch_size = np.asarray(self.size, dtype=np.int64)
        rec.batch_instance = np.asarray(self.instance, dtype=np.int64)
        return rec


def _fast(schedule: Schedule, policy: BatchPolicy, svc: _Service) -> ServeRecords:
    sched: list[float] = schedule.times.tolist()
    n = len(sched)
    deq = [math.nan] * n
    done = [math.nan] * n
    bat = [-1] * n
    out = [OK] * n
    batches = _Batches()
    free = list(range(policy.instances - 1, -1, -1))  # idle instance ids (a stack)
    busy: list[tuple[float, int]] = []  # (end, instance)
    sizes = sorted({*policy.preferred, policy.max_batch})
    timeout, max_batch = policy.timeout_s, policy.max_batch
    head = 0  # the queue is sched[head:tail]
    t = 0.0
    wake = INF
    last_end = -INF  # when the server last finished a batch
    draw, heappop, heappush = svc.draw, heapq.heappop, heapq.heappush
    b_start, b_end, b_inst = batches.start.append, batches.end.append, batches.instance.append
    b_size = batches.size
    while True:
        t_c = busy[0][0] if busy else INF
        if free:
            queued = bisect_right(sched, t, head) - head
            # the next arrival that can change the batcher's mind: one that makes a
            # preferred (or the max) size, or any arrival into an empty queue
            target = next((s for s in sizes if s > queued), max_batch) if queued else 1
            idx = head + target - 1
            t_fill = sched[idx] if idx < n else INF
        else:
            t_fill = INF
        t = t_c if t_c < wake else wake
        if t_fill < t:
            t = t_fill
        if t == INF:
            break
        if t == t_c:
            while busy and busy[0][0] <= t:
                last_end, inst = heappop(busy)
                free.append(inst)
        wake = INF
        while free:
            tail = bisect_right(sched, t, head)
            if timeout < INF:  # requests due before t - timeout are dropped
                gone = min(bisect_left(sched, t - timeout, head, tail), tail)
                if gone > head:
                    out[head:gone] = [TIMED_OUT] * (gone - head)
                    deq[head:gone] = [t] * (gone - head)
                    head = gone
            queued = tail - head
            if not queued:
                break
            k, wait = take(queued, t - sched[head], policy)
            if not k:
                wake = t + wait
                break
            end = t + draw(k, 0.0 if busy else t - last_end, t, sched, tail)
            inst = free.pop()
            b = len(b_size)
            b_start(t)
            b_end(end)
            b_size.append(k)
            b_inst(inst)
            if k == 1:
                deq[head] = t
                done[head] = end
                bat[head] = b
            else:
                deq[head : head + k] = [t] * k
                done[head : head + k] = [end] * k
                bat[head : head + k] = [b] * k
            heappush(busy, (end, inst))
            head += k
    rec = ServeRecords(
        scheduled=schedule.times.copy(),
        sent=schedule.times.copy(),
        dequeued=np.asarray(deq),
        done=np.asarray(done),
        batch=np.asarray(bat, dtype=np.int64),
        hit=np.zeros(n, bool),
        outcome=np.asarray(out, dtype=np.int8),
    )
    timed_out = rec.outcome == TIMED_OUT
    rec.done[timed_out] = np.nan
    return batches.into(rec)


def _general(
    schedule: Schedule,
    policy: BatchPolicy,
    svc: _Service,
    cache_size: int,
    closed_clients: int,
    closed_requests: int,
) -> ServeRecords:
    closed = closed_clients > 0
    keys: list[int] = schedule.keys.tolist()
    n = closed_requests if closed else len(keys)
    if closed and len(keys) < n:
        raise ValueError("closed loop: the schedule has fewer keys than requests")
    sched: list[float] = [0.0] * n if closed else schedule.times.tolist()
    deq = [math.nan] * n
    done = [math.nan] * n
    bat = [-1] * n
    out = [OK] * n
    hit = [False] * n
    cache = ResponseCache(cache_size)
    batches = _Batches()
    members: list[list[int]] = []
    free = list(range(policy.instances - 1, -1, -1))
    busy: list[tuple[float, int, int]] = []  # (end, instance, batch)
    sends: list[float] = [0.0] * min(closed_clients, n) if closed else []  # closed: a heap
    queue: deque[int] = deque()
    timeout, limit = policy.timeout_s, policy.queue_limit
    i = 0
    t = 0.0
    wake = INF
    last_end = -INF
    draw, heappop, heappush = svc.draw, heapq.heappop, heapq.heappush
    lookup, store = cache.lookup, cache.store
    popleft, append = queue.popleft, queue.append
    while True:
        t_arr = INF
        if i < n:
            t_arr = (sends[0] if sends else INF) if closed else sched[i]
        t_c = busy[0][0] if busy else INF
        t = t_arr if t_arr < t_c else t_c
        if wake < t:
            t = wake
        if t == INF:
            break
        if t_c <= t_arr and t_c <= wake:
            last_end, inst, b = heappop(busy)
            free.append(inst)
            if cache_size:
                for j in members[b]:
                    store(keys[j])
            if closed:
                for _ in members[b]:
                    heappush(sends, t)
        elif t_arr <= wake:
            j = i
            i += 1
            if closed:
                heapq.heappop(sends)
                sched[j] = t
            if cache_size and lookup(keys[j]):
                hit[j] = True
                done[j] = t
                if closed:
                    heapq.heappush(sends, t)
                continue
            if limit and len(queue) >= limit:
                out[j] = REJECTED
                if closed:
                    heapq.heappush(sends, t)
                continue
            append(j)
        else:
            wake = INF
        wake = INF
        if i < n and ((sends and sends[0] <= t) if closed else sched[i] <= t):
            continue  # every arrival at this instant joins before the batcher decides
        if busy and busy[0][0] <= t:
            continue  # and every batch that ended by now frees its instance first
        while free and queue:
            while queue and t - sched[queue[0]] > timeout:
                j = queue.popleft()
                out[j] = TIMED_OUT
                deq[j] = t
                if closed:
                    heapq.heappush(sends, t)
            if not queue:
                break
            k, wait = take(len(queue), t - sched[queue[0]], policy)
            if not k:
                wake = t + wait
                break
            end = t + draw(k, 0.0 if busy else t - last_end, t, None if closed else sched, i)
            inst = free.pop()
            b = batches.add(t, end, k, inst)
            taken = [popleft() for _ in range(k)]
            members.append(taken)
            for j in taken:
                deq[j] = t
                done[j] = end
                bat[j] = b
            heappush(busy, (end, inst, b))
    n_sent = i
    rec = ServeRecords(
        scheduled=np.asarray(sched[:n_sent]),
        sent=np.asarray(sched[:n_sent]),
        dequeued=np.asarray(deq[:n_sent]),
        done=np.asarray(done[:n_sent]),
        batch=np.asarray(bat[:n_sent], dtype=np.int64),
        hit=np.asarray(hit[:n_sent], dtype=bool),
        outcome=np.asarray(out[:n_sent], dtype=np.int8),
    )
    return batches.into(rec)
