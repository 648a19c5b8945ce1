"""The simulator's event loop for a closed loop: `clients` clients, each sending its next
request when its last one ended (answered, hit, rejected or timed out), so arrivals are
made as the run goes (a heap of send times), not read from a schedule."""

from __future__ import annotations

import heapq
import math

import numpy as np

from engine.serve.batching import BatchPolicy, BatchRule
from engine.serve.records import ServeRecords
from engine.serve.response_cache import ResponseCache
from engine.serve.sim.service_draws import TURN, ServiceDraws
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
    rule = BatchRule(policy)
    cache = ResponseCache(cache_size)
    joined: list[int] = []  # requests in the order they joined the queue
    joined_keys: list[int] = []  # and their keys (the cache stores a batch's on completion)
    head = 0  # the queue is joined[head:]
    free = list(range(policy.instances - 1, -1, -1))
    busy: list[tuple[float, int, int]] = []  # (free again, instance, batch)
    sends: list[float] = [0.0] * min(clients, n)  # a heap: when each client sends next
    timeout, limit, max_batch = policy.timeout_s, policy.queue_limit, policy.max_batch
    pick, delay, ripe = rule.pick, rule.delay, rule.ripe
    table, lens, draws, adjust = svc.table, svc.lens, svc.draws, svc.adjust
    wake_late, turn, turn_lens = svc.wake_late, svc.turn, svc.turn_lens
    by_before = svc.pick
    before = [0] * policy.instances  # each instance's last batch size
    n_draws = len(draws)
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
        tail = len(joined)
        while free and head < tail:
            gone = head
            while gone < tail and t - sched[joined[gone]] > timeout:
                gone += 1
            if gone > head:
                trail.drop_first.append(head)
                trail.drop_count.append(gone - head)
                trail.drop_time.append(t)
                for _ in range(gone - head):
                    heappush(sends, t)
                head = gone
                if head == tail:
                    break
            queued = tail - head
            if queued >= max_batch:
                k = max_batch
            else:
                k = pick[queued]
                if not k:
                    waited = t - sched[joined[head]]
                    # not ripe yet, unless t is so large that the rest of the delay does
                    # not move it (a trickle's arrivals hours in): then it is ripe now
                    if waited < ripe and t + (delay - waited) > t:
                        wake = t + (delay - waited)
                        if wake_late is not None:  # the batcher's timed wait wakes late
                            wake += wake_late(len(b_size), 0.0 if busy else wake - last_end)
                        break
                    k = queued
            b = len(b_size)
            inst = free.pop()
            if by_before is None:
                took = table[k][int(draws[b % n_draws] * lens[k])]
            else:  # drawn by the size of this instance's batch before
                took = by_before(k, b, before[inst], 0.0 if busy else t - last_end)
                before[inst] = k
            if adjust is not None:
                took = adjust(k, b, t, took, 0.0 if busy else t - last_end)
            end = t + (took if took > 1e-7 else 1e-7)
            trail.start.append(t)
            trail.end.append(end)
            b_size.append(k)
            trail.instance.append(inst)
            b_first.append(head)
            free_at = end
            if turn is not None:  # the instance's bookkeeping before it takes the next
                free_at += turn[k][int(draws[(b + TURN) % n_draws] * turn_lens[k])]
            heappush(busy, (free_at, inst, b))
            head += k
    return trail.records(np.asarray(sched[:i], np.float64), np.asarray(joined, np.int64))
