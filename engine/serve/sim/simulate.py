"""A discrete-event simulator of the serving loop: the same traffic schedule, the same
batcher rules (`batching.take`), the same response cache and the same statistics as the
real loop; only the service model differs (batch times drawn from a calibration).

Three event loops share the rules: for open-loop traffic, a fast one without cache or
queue limit (`open_loop.fifo_loop`, where the FIFO queue is a range of the sorted arrivals)
and one with them (`open_loop.queue_loop`); and one for closed-loop clients
(`closed_loop.closed_loop`). Tests check the open ones agree, and that all give the records
stored before they were sped up, bit for bit. They run a million events in pure Python, so
they apply per event what is written once elsewhere, inline: the batcher's rule as tables
(`BatchRule`), the service draw (`ServiceDraws`); records are assembled at the end with
numpy (`Trail`).
"""

from __future__ import annotations

import numpy as np

from engine.serve.batching import BatchPolicy
from engine.serve.records import ServeRecords
from engine.serve.sim.closed_loop import closed_loop
from engine.serve.sim.lateness import PARKED, Draw, send_states, states_at, taken_at_once
from engine.serve.sim.open_loop import fifo_loop, queue_loop
from engine.serve.sim.service import ServiceModel
from engine.serve.sim.service_draws import DRAWS, REACH, ServiceDraws
from engine.serve.traffic.schedule import Schedule


def simulate(
    schedule: Schedule,
    policy: BatchPolicy,
    service: ServiceModel,
    *,
    cache_size: int = 0,
    closed_clients: int = 0,
    closed_requests: int = 0,
    seed: int = 0,
    slow_stretches: bool = False,
) -> ServeRecords:
    """Simulate serving `schedule` (or, with `closed_clients`, that many clients sending
    `closed_requests` in all, content keys from `schedule.keys`). `slow_stretches`: service
    times from the calibrated slow-stretch process (when the calibration has one) rather
    than drawn one by one."""
    rng = np.random.default_rng(seed)
    # uniform; a batch of k takes table[k][int(u * len)]. Only the draws the loops can
    # reach are made into a list (the k-th batch reads draws k and k + 7919, and there are
    # no more batches than requests): a search runs hundreds of short simulations, and a
    # list of all 1M draws cost a fifth of each. No index wraps, so the figures are the
    # same as with the whole cycle.
    n_requests = closed_requests if closed_clients else len(schedule)
    draws = rng.random(DRAWS)[: min(DRAWS, n_requests + REACH)].tolist()
    stretches = None
    if slow_stretches and service.stretches is not None:  # batches slow in runs, not alone
        stretches = service.stretches.multipliers(len(draws), seed).tolist()
    svc = ServiceDraws(service, policy.max_batch, draws, stretches)
    if closed_clients:
        return closed_loop(schedule, policy, svc, cache_size, closed_clients, closed_requests)
    late = Draw(service.send_late)
    if not late or not len(schedule):
        return open_loop(schedule, schedule.times, policy, svc, cache_size)
    due = schedule.times
    pools = late.samples
    if len(pools) == 1:  # one pool (an older calibration): every request draws from it
        return open_loop(schedule, due + rng.choice(pools[0], len(due)), policy, svc, cache_size)
    # how late a send is depends on the server's state when it was due (sim/lateness.py),
    # which the run decides: a first run with sends drawn from every state's pool, then
    # each drawn from its own state's in that run
    everyone = np.concatenate([np.asarray(p) for p in pools])
    look = due + rng.choice(everyone, len(due))
    first = open_loop(schedule, look, policy, svc, cache_size)
    if PARKED in service.send_late:  # calibration version 16: the generator's last look
        at_once = taken_at_once(first, policy.max_batch, policy.preferred, policy.delay_s)
        states = send_states(due, look, first, policy.instances, at_once)
    else:  # before: the state at the due time (a session's older prediction stays)
        states = states_at(due, first.batch_start, first.batch_end, policy.instances)
    return open_loop(schedule, due + late.many(rng, states), policy, svc, cache_size)


def open_loop(
    schedule: Schedule, arrive: np.ndarray, policy: BatchPolicy, svc: ServiceDraws, cache_size: int
) -> ServeRecords:
    """Serve `schedule`'s requests reaching the server at `arrive` (their scheduled times,
    or later: the sender's lateness); records in the order they reached it, latency from
    their scheduled times."""
    due = schedule.times
    if arrive is not due:  # in arrival order
        order = np.argsort(arrive, kind="stable")
        sizes = schedule.sizes[order] if schedule.sizes is not None else None
        schedule = Schedule(arrive[order], schedule.keys[order], sizes)
        due = due[order]
    if cache_size or policy.queue_limit:
        rec = queue_loop(schedule, policy, svc, cache_size)
    else:
        rec = fifo_loop(schedule, policy, svc)
    rec.scheduled = due.copy()  # latency runs from the scheduled time
    return rec
