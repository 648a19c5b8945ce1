"""The simulator's event loops for open-loop traffic (arrivals known in advance).

`fifo_loop` (no cache, no queue limit): every request joins the queue, so the FIFO queue
is a range of the sorted arrivals, and the loop jumps from one event that can change the
batcher's mind to the next (a completion, the delay expiring, an arrival that makes a
preferred or the max size); its work per batch does not grow with the batch.

`queue_loop` (a response cache and/or a queue limit): each arrival is looked up or may be
rejected, so it is an event of its own. Arrivals run in a tight inner loop up to the next
completion or wake-up: while no instance is free they only queue; while the batcher waits
out its delay, each one renews the wake-up as the batcher would (the same arithmetic, so
the same float); only an arrival that lets it take a batch goes on to the batcher.

Both follow the same order of events as the real loop: at one instant, completions free
their instance first, then every arrival joins, then the batcher decides. Calibrated, both
also wake the batcher late when a delay expires (or at the first arrival after it, which
notifies it), free an instance a turnaround after its batch ends, and draw a back-to-back
batch's time by its instance's last size (`ServiceDraws`; sim/lateness.py).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right

import numpy as np

from engine.serve.batching import BatchPolicy, BatchRule
from engine.serve.records import ServeRecords
from engine.serve.response_cache import ResponseCache
from engine.serve.sim.batcher import batch_starter, instances, queue_batcher
from engine.serve.sim.service_draws import ServiceDraws
from engine.serve.sim.trail import Trail
from engine.serve.traffic.schedule import Schedule

INF = math.inf


def fifo_loop(schedule: Schedule, policy: BatchPolicy, svc: ServiceDraws) -> ServeRecords:
    """Serve `schedule` with no cache and no queue limit."""
    sched: list[float] = schedule.times.tolist()
    n = len(sched)
    trail = Trail()
    rule = BatchRule(policy)
    free, busy = instances(policy)  # idle instance ids (a stack); (free again, instance, batch)
    timeout, max_batch = policy.timeout_s, policy.max_batch
    pick, grow, delay, ripe = rule.pick, rule.grow, rule.delay, rule.ripe
    wake_late = svc.wake_late
    start = batch_starter(policy, svc, trail, free, busy)
    head = 0  # the queue is sched[head:tail], tail: the arrivals by t
    tail = bisect_right(sched, 0.0)
    t = 0.0
    wake = INF
    t_ripe = INF  # waking late: the first arrival after the delay expired wakes the batcher
    last_end = -INF  # when the server last finished a batch
    heappop = heapq.heappop
    b_size, ends = trail.size, trail.end
    while True:
        t_c = busy[0][0] if busy else INF
        if free:  # tail is up to date: the batcher ran at t
            queued = tail - head
            # the next arrival that can change the batcher's mind: one that makes a
            # preferred (or the max) size, or any arrival into an empty queue
            idx = head + (grow[queued] if queued < max_batch else max_batch) - 1
            t_fill = sched[idx] if idx < n else INF
        else:
            t_fill = INF
        t = t_c if t_c < wake else wake
        if t_fill < t:
            t = t_fill
        if t_ripe < t:
            t = t_ripe
        if t == INF:
            break
        if t == t_c:
            while busy and busy[0][0] <= t:
                _, inst, b = heappop(busy)
                last_end = ends[b]
                free.append(inst)
        wake = t_ripe = INF
        if not free:
            continue
        tail = bisect_right(sched, t, head)
        while free:
            if timeout < INF:  # requests due before t - timeout are dropped
                gone = min(bisect_left(sched, t - timeout, head, tail), tail)
                if gone > head:
                    trail.drop_first.append(head)
                    trail.drop_count.append(gone - head)
                    trail.drop_time.append(t)
                    head = gone
            queued = tail - head
            if not queued:
                break
            if queued >= max_batch:
                k = max_batch
            else:
                k = pick[queued]
                if not k:
                    waited = t - sched[head]
                    # not ripe yet, unless t is so large that the rest of the delay does
                    # not move it (a trickle's arrivals hours in): then it is ripe now
                    if waited < ripe and t + (delay - waited) > t:
                        wake = t + (delay - waited)
                        if wake_late is not None:  # the batcher's timed wait wakes late
                            wake += wake_late(len(b_size), 0.0 if busy else wake - last_end)
                            t_ripe = first_ripe(sched, tail, sched[head], delay, ripe, wake)
                        break
                    k = queued
            start(t, k, head, last_end)
            head += k
    return trail.records(schedule.times, None)


def first_ripe(
    sched: list[float], tail: int, oldest: float, delay: float, ripe: float, wake: float
) -> float:
    """The first arrival from `tail` on that finds the oldest request (due at `oldest`)
    ripe, if before `wake`: it is notified and takes the batch then (INF: none). The same
    test as an arrival's in `queue_loop`, so the same instant."""
    n = len(sched)
    j = bisect_left(sched, oldest + ripe, tail)
    while j > tail and ripe_at(sched[j - 1], oldest, delay, ripe):
        j -= 1
    while j < n and not ripe_at(sched[j], oldest, delay, ripe):
        j += 1
    return sched[j] if j < n and sched[j] < wake else INF


def ripe_at(t: float, oldest: float, delay: float, ripe: float) -> bool:
    waited = t - oldest
    return waited >= ripe or t + (delay - waited) <= t


def queue_loop(
    schedule: Schedule, policy: BatchPolicy, svc: ServiceDraws, cache_size: int
) -> ServeRecords:
    """Serve `schedule` through a response cache of `cache_size` (0: none) and the policy's
    queue limit."""
    keys: list[int] = schedule.keys.tolist()
    sched: list[float] = schedule.times.tolist()
    n = len(sched)
    trail = Trail()
    rule = BatchRule(policy)
    cache = ResponseCache(cache_size)
    joined: list[int] = []  # requests in the order they joined the queue
    joined_keys: list[int] = []  # and their keys (the cache stores a batch's on completion)
    head = 0  # the queue is joined[head:]
    free, busy = instances(policy)  # idle instance ids (a stack); (free again, instance, batch)
    timeout, limit, max_batch = policy.timeout_s, policy.queue_limit, policy.max_batch
    pick, delay, ripe = rule.pick, rule.delay, rule.ripe
    wake_late = svc.wake_late
    decide_at = queue_batcher(policy, svc, trail, free, busy, sched, joined)
    i = 0  # the next arrival
    t = 0.0
    wake = INF  # when the batcher asks again (INF whenever no instance is free)
    last_end = -INF
    heappop = heapq.heappop
    holds, lookup = cache.holds, cache.lookup
    store_all = cache.store_all
    b_size, b_first, ends = trail.size, trail.first, trail.end
    hits, rejected = trail.hits.append, trail.rejected.append
    join, join_key = joined.append, joined_keys.append
    while True:
        t_c = busy[0][0] if busy else INF
        t_arr = sched[i] if i < n else INF
        if t_c <= t_arr and t_c <= wake:
            if t_c == INF:
                break
            t = t_c
            _, inst, b = heappop(busy)
            last_end = ends[b]
            free.append(inst)
            if cache_size:
                p = b_first[b]
                store_all(joined_keys[p : p + b_size[b]])
            wake = INF
            if t_arr <= t:
                continue  # every arrival at this instant joins before the batcher decides
            if busy and busy[0][0] <= t:
                continue  # and every batch that ended by now frees its instance first
        elif t_arr <= wake:
            # arrivals up to the next completion or wake-up; most only queue (no instance
            # free) or leave the batcher waiting: only one that lets it take a batch (or
            # drop a timed-out request) goes on to the batcher below
            decide = False
            while i < n:
                t_next = sched[i]
                if t_next >= t_c or t_next > wake:
                    break
                t = t_next
                j = i
                i += 1
                key = keys[j]
                if holds(key) and lookup(key):
                    hits(j)
                    continue
                if limit and len(joined) - head >= limit:
                    rejected(j)
                    continue
                join(j)
                join_key(key)
                if not free:
                    continue  # wake is INF: nothing to decide until a completion
                wake = INF
                if i < n and sched[i] <= t:
                    continue  # every arrival at this instant joins before the batcher decides
                oldest = sched[joined[head]]
                queued = len(joined) - head
                if t - oldest > timeout or queued >= max_batch or pick[queued]:
                    decide = True
                    break
                waited = t - oldest
                if waited >= ripe or t + (delay - waited) <= t:
                    decide = True
                    break
                wake = t + (delay - waited)  # as the batcher below would
                if wake_late is not None:
                    wake += wake_late(len(b_size), 0.0 if busy else wake - last_end)
            if not decide:
                continue
        else:
            t = wake
            wake = INF
        head, wake, _ = decide_at(t, head, last_end)
    return trail.records(schedule.times, np.asarray(joined, np.int64))
