"""The simulator's event loop for a closed loop: `clients` clients, each sending its next
request when its last one ended (answered, hit, rejected or timed out), so arrivals are
made as the run goes (a heap of send times), not read from a schedule."""

from __future__ import annotations

import heapq
import math

import numpy as np

from engine.serve.batching import BatchPolicy
from engine.serve.records import ServeRecords
from engine.serve.response_cache import ResponseCache
from engine.serve.sim.batcher import instances, queue_batcher
from engine.serve.sim.service_draws import ServiceDraws
from engine.serve.sim.trail import Trail
from engine.serve.traffic.schedule import Schedule

INF = math.inf


def closed_loop(
    schedule: Schedule,
    policy: BatchPolicy,
    svc: ServiceDraws,
    cache_size: int,
    clients: int,
    requests: int,
) -> ServeRecords:
    """`requests` in all, their content keys from `schedule.keys`."""
    keys: list[int] = schedule.keys.tolist()
    n = requests
    if len(keys) < n:
        raise ValueError("closed loop: the schedule has fewer keys than requests")
    sched: list[float] = [0.0] * n  # when each was sent
    trail = Trail()
    cache = ResponseCache(cache_size)
    joined: list[int] = []  # requests in the order they joined the queue
    joined_keys: list[int] = []  # and their keys (the cache stores a batch's on completion)
    head = 0  # the queue is joined[head:]
    free, busy = instances(policy)  # idle instance ids (a stack); (free again, instance, batch)
    sends: list[float] = [0.0] * min(clients, n)  # a heap: when each client sends next
    limit = policy.queue_limit
    decide = queue_batcher(policy, svc, trail, free, busy, sched, joined)
    i = 0
    t = 0.0
    wake = INF
    last_end = -INF
    heappop, heappush = heapq.heappop, heapq.heappush
    b_size, b_first = trail.size, trail.first
    while True:
        t_arr = (sends[0] if sends else INF) if i < n else INF
        t_c = busy[0][0] if busy else INF
        t = t_arr if t_arr < t_c else t_c
        if wake < t:
            t = wake
        if t == INF:
            break
        if t_c <= t_arr and t_c <= wake:
            _, inst, b = heappop(busy)
            last_end = trail.end[b]
            free.append(inst)
            if cache_size:
                p = b_first[b]
                cache.store_all(joined_keys[p : p + b_size[b]])
            for _ in range(b_size[b]):
                heappush(sends, t)
        elif t_arr <= wake:
            j = i
            i += 1
            heappop(sends)
            sched[j] = t
            key = keys[j]
            if cache_size and cache.lookup(key):
                trail.hits.append(j)
                heappush(sends, t)
                continue
            if limit and len(joined) - head >= limit:
                trail.rejected.append(j)
                heappush(sends, t)
                continue
            joined.append(j)
            joined_keys.append(key)
        wake = INF
        if i < n and sends and sends[0] <= t:
            continue  # every arrival at this instant joins before the batcher decides
        if busy and busy[0][0] <= t:
            continue  # and every batch that ended by now frees its instance first
        head, wake, dropped = decide(t, head, last_end)
        for _ in range(dropped):  # a timed-out request's client sends its next
            heappush(sends, t)
    return trail.records(np.asarray(sched[:i], np.float64), np.asarray(joined, np.int64))
