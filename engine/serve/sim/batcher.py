"""The batcher as the simulator's event loops run it, written once: starting a batch on a
free instance (its time drawn, its records kept, the instance busy until it is free again),
used by every loop, and the batcher over a queue of joined requests (drop the timed-out,
take batches while an instance is free, or say when to ask again), used by the loops that
keep such a queue (`queue_loop`, a response cache or a queue limit; `closed_loop`).

Both are closures over the run's lists, so the loops pay one call per batch (and one per
decision), not an attribute lookup per field."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

from engine.serve.batching import BatchPolicy, BatchRule
from engine.serve.sim.service_draws import TURN, ServiceDraws
from engine.serve.sim.trail import Trail

INF = math.inf

# (when the instance is free again, instance, batch): busy instances, a heap
Busy = list[tuple[float, int, int]]
# start(t, k, head, last_end): the next batch, of k from queue position `head`, starts at t
Start = Callable[[float, int, int, float], None]
# decide(t, head, last_end) -> (head, wake, dropped): the batcher asked at t
Decide = Callable[[float, int, float], tuple[int, float, int]]


def instances(policy: BatchPolicy) -> tuple[list[int], Busy]:
    """The policy's instances at the start: all idle (their ids, a stack), none busy."""
    return list(range(policy.instances - 1, -1, -1)), []


def batch_starter(
    policy: BatchPolicy, svc: ServiceDraws, trail: Trail, free: list[int], busy: Busy
) -> Start:
    """Start a batch of `k` (the queue's from position `head`) at `t` on the next free
    instance: its time drawn (by its instance's batch before, and slowed after the server
    idled since `last_end`, when calibrated), kept in `trail`, and the instance busy until
    its batch ends (and its turnaround after it, when calibrated)."""
    table, lens, draws, adjust = svc.table, svc.lens, svc.draws, svc.adjust
    turn, turn_lens, by_before = svc.turn, svc.turn_lens, svc.pick
    before = [0] * policy.instances  # each instance's last batch size
    n_draws = len(draws)
    heappush = heapq.heappush
    b_start, b_end, b_inst = trail.start.append, trail.end.append, trail.instance.append
    b_size, b_first = trail.size, trail.first.append

    def start(t: float, k: int, head: int, last_end: float) -> None:
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
        b_start(t)
        b_end(end)
        b_size.append(k)
        b_inst(inst)
        b_first(head)
        free_at = end
        if turn is not None:  # the instance's bookkeeping before it takes the next
            free_at += turn[k][int(draws[(b + TURN) % n_draws] * turn_lens[k])]
        heappush(busy, (free_at, inst, b))

    return start


def queue_batcher(
    policy: BatchPolicy,
    svc: ServiceDraws,
    trail: Trail,
    free: list[int],
    busy: Busy,
    sched: list[float],
    joined: list[int],
) -> Decide:
    """The batcher over the queue `joined[head:]` (request numbers; `sched[j]`: when request
    j arrived), asked at `t` with every arrival and completion by `t` in: while an instance
    is free and requests wait, it drops those waiting past the policy's timeout, then takes
    a batch or, when none is ripe, stops with the time to ask again (`wake`, INF: none; a
    calibrated batcher's timed wait wakes late). Returns the new head, `wake`, and how many
    it dropped."""
    rule = BatchRule(policy)
    timeout, max_batch = policy.timeout_s, policy.max_batch
    pick, delay, ripe = rule.pick, rule.delay, rule.ripe
    wake_late = svc.wake_late
    b_size = trail.size
    drop_first, drop_count = trail.drop_first.append, trail.drop_count.append
    drop_time = trail.drop_time.append
    start = batch_starter(policy, svc, trail, free, busy)

    def decide(t: float, head: int, last_end: float) -> tuple[int, float, int]:
        tail = len(joined)
        wake = INF
        dropped = 0
        while free and head < tail:
            if timeout < INF:
                gone = head
                while gone < tail and t - sched[joined[gone]] > timeout:
                    gone += 1
                if gone > head:
                    drop_first(head)
                    drop_count(gone - head)
                    drop_time(t)
                    dropped += gone - head
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
            start(t, k, head, last_end)
            head += k
        return head, wake, dropped

    return decide
