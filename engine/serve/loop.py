"""The real serving loop: requests sent at their scheduled times by a generator thread,
queued, batched by the same rules as the simulator (`batching.take`), stacked along the
batch axis and run by `instances` worker threads with the backend's `run_batch`.

Open loop: the generator never waits for the server. A request's latency runs from its
scheduled time, so when the generator itself falls behind (a slow machine, a GC pause)
that shows in the latency, and its lateness is measured and reported. `closed:N` is a
closed loop instead: N clients, each sending when its last reply arrived.

While every instance is running a batch, nothing reads the queue, so the generator
parks instead of waking for each request: whoever looks at the queue next (an instance
that finished, the progress report) first admits every request already due, in order and
at its scheduled time, with the cache, queue limit and batcher seeing exactly what they
would have. An instance admits what arrived during its batch before storing the batch's
results in the cache. At saturation the generator then wakes once per batch, not once per
request: on 2 vCPUs its wake-ups had taken 5-7% of a batch-8 engine's throughput.

A request is handed out (and recorded) when it arrives, as unserved, and again when it
ends, so a killed run's file keeps its backlog. A signal (Ctrl+C, SIGTERM) stops the run
within a report: no request is admitted or batched after it, the instances finish the
batch they run and are joined (never left inside the engine as the interpreter exits),
what still waits ends unserved, and the run ends with its figures.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

import numpy as np

from engine import interrupt
from engine.backends.base import Feeds
from engine.errors import OpScopeError
from engine.events import Event, Notice, Progress
from engine.serve.batching import BatchPolicy, take
from engine.serve.records import (
    OK,
    REJECTED,
    TIMED_OUT,
    UNSERVED,
    ServeRecords,
    latency_batch,
    served_requests,
    timing_done,
)
from engine.serve.response_cache import ResponseCache
from engine.serve.sched_slice import short_slice
from engine.serve.setup import stack_requests
from engine.serve.traffic.schedule import Schedule

LEAD_S = 0.05  # the schedule starts this long after the threads do
PROGRESS_S = 0.25  # a report, and with it the requests a session commits, this often
LATE_WARN_MS = 2.0  # generator lateness p99 above this is reported as a warning
PARK_S = 0.05  # a parked generator checks for a stop this often
SWITCH_S = 0.0005  # GIL switch interval while serving (Python's default is 5 ms)
PR_SET_TIMERSLACK = 29
LONG_WAIT_S = 60.0  # a long gap to the next arrival is waited in steps of this
DRAIN_MIN_S = 10.0  # the least time an open-loop run has, past its last arrival, to drain


def precise_timers() -> None:
    """Let this thread's sleeps and timed waits end within microseconds of their due time
    (Linux: timer slack 1 ns instead of 50 us). Lateness of sends and of the batcher's
    delay timer otherwise adds ~0.1 ms to every request."""
    if sys.platform != "linux":
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def drain_deadline(arrivals: np.ndarray) -> float:
    """When an open-loop run ends at the latest: its last arrival, then as long again
    (at least 10 s) for a backlog to drain (a million requests due at once drained for
    a quarter of an hour)."""
    span = float(arrivals[-1]) if arrivals.size else 0.0
    return span + max(DRAIN_MIN_S, span)


class BatchLog:
    """The batches run so far (start, end, size, instance), in arrays sized and touched
    when the run is planned (a batch takes a request at least): serving adds no object
    per batch, and the resident memory of a long run stays flat."""

    def __init__(self, capacity: int) -> None:
        self.start = np.full(capacity, np.nan)
        self.end = np.full(capacity, np.nan)
        self.size = np.full(capacity, 0, np.int64)
        self.instance = np.full(capacity, 0, np.int64)
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def append(self, start: float, end: float, size: int, instance: int) -> None:
        i = self.count
        self.start[i], self.end[i], self.size[i], self.instance[i] = start, end, size, instance
        self.count = i + 1

    def since(self, first: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Views of batches `first` onward (start, end, size, instance)."""
        part = slice(first, self.count)
        return self.start[part], self.end[part], self.size[part], self.instance[part]


class ServingLoop:
    """One serving run. `run()` yields progress until every request has ended."""

    def __init__(
        self,
        run_batch: Callable[[Feeds], object],
        request_feeds: Callable[[int], Feeds],
        schedule: Schedule,
        policy: BatchPolicy,
        cache_size: int = 0,
        closed_clients: int = 0,
        closed_requests: int = 0,
        warmup_s: float = 0.0,
        report_s: float = PROGRESS_S,
        deadline_s: float | None = None,
    ) -> None:
        self.run_batch = run_batch
        self.deadline_s = deadline_s  # seconds from the start: the run stops then, said so
        self.timed_out = False  # the deadline stopped it
        self.report_s = report_s
        self.warmup_s = warmup_s
        self.request_feeds = request_feeds
        self.policy = policy
        self.closed = closed_clients > 0
        self.clients = closed_clients
        n = closed_requests if self.closed else len(schedule)
        self.keys: list[int] = schedule.keys[:n].tolist()
        if len(self.keys) < n:
            raise ValueError("the schedule has fewer keys than requests")
        self.rec = ServeRecords.empty(n)
        if not self.closed:
            self.rec.scheduled[:] = schedule.times
        self.cache = ResponseCache(cache_size)
        self.queue: deque[int] = deque()
        self.cond = threading.Condition()
        self.sent = 0  # requests handed to the server so far
        self._next_send = 0  # open loop: the next request to arrive (sent in order)
        self._busy = 0  # instances running a batch
        self._parked = False  # the generator waits while every instance is busy
        self.ended = 0  # requests completed, rejected or timed out
        self.generator_done = False
        self.stop = threading.Event()  # stop sending: what was sent is served
        self._abort = False  # stop serving too (a signal, the run's end): queued unserved
        self.interrupted = False  # a signal stopped the run (engine.interrupt)
        self.unserved = 0  # requests that still waited when it stopped
        self.dropped = 0  # requests planned and never sent (a stop, the drain deadline)
        # requests in the order they arrived, and ended, since the last report: handed out
        # then and dropped (kept, they grew a load run by ~200 bytes a request: 0.6 MB a
        # minute at 50/s)
        self._arrived: list[int] = []
        self._has_ended = np.full(n, False)
        self._reported_waiting = np.full(n, False)  # handed out as waiting (unserved)
        self._drained = threading.Event()  # the senders are done and every request ended
        self.error: BaseException | None = None
        self.batches = BatchLog(max(n, 1))  # a batch takes a request at least
        self._client_events = [threading.Event() for _ in range(closed_clients)]
        self._owner: dict[int, int] = {}  # closed loop: request -> client
        self.t0 = 0.0
        self._batches_reported = 0  # batches handed out in ServedRequests so far
        self._queue_peak = 0  # the most requests waiting at once since the last report
        self._ended_order: list[int] = []  # since the last report (see _arrived)

    # ------------------------------------------------------------------ the run
    def run(self) -> Iterator[Event]:
        n = len(self.rec)
        threads = [
            threading.Thread(target=self._worker, args=(k,), name=f"opscope-instance-{k}")
            for k in range(self.policy.instances)
        ]
        if self.closed:
            self._next = 0
            self._next_lock = threading.Lock()
            senders = [
                threading.Thread(target=self._client, args=(c,), name=f"opscope-client-{c}")
                for c in range(self.clients)
            ]
        else:
            senders = [threading.Thread(target=self._generator, name="opscope-traffic")]
        switch = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_S)  # a worker back from the engine gets the GIL sooner
        self.t0 = time.perf_counter() + LEAD_S
        for th in threads + senders:
            th.daemon = True
            th.start()
        with interrupt.deferred():  # a signal is polled here, not raised into the joins
            try:
                while True:
                    alive = [th for th in senders if th.is_alive()]
                    if alive:
                        for th in alive:
                            th.join(self.report_s / len(alive))
                    else:  # a backlog draining: wait for it, never spin (a core and the
                        self._drained.wait(self.report_s)  # GIL taken from the instances)
                    if interrupt.received.is_set() or self._abort:
                        self.interrupted = interrupt.received.is_set()
                        break
                    # recorded as they come: a kill loses a report (~0.25-0.5 s); the
                    # progress after them, as the session commits on the event that finds
                    # its interval passed: the requests are in that commit
                    yield from self._new_samples()
                    yield Progress(
                        "serving",
                        self.ended,
                        n,
                        f"{self.sent:,} sent, {self.ended:,} done, {len(self.queue)} queued",
                    )
                    if self.error is not None:
                        raise self.error
                    if interrupt.received.is_set():  # while the samples were handed out (a
                        self.interrupted = True  # million at once: a consumer's long write)
                        break
                    if not any(th.is_alive() for th in senders) and self.ended >= self.sent:
                        break
                    if self.deadline_s is not None and self._elapsed() > self.deadline_s:
                        self.timed_out = True
                        break
            finally:
                self._halt(threads + senders)
                sys.setswitchinterval(switch)
        self._drop_unsent()
        yield from self._new_samples()
        if interrupt.received.is_set():  # while the last samples were written (a million
            self.interrupted = True  # due at once took 30 s): kept, and the run says so
        if self.timed_out:
            yield Notice(
                "warning",
                f"stopped {self.deadline_s:.3g} s in, at the drain deadline (the last "
                f"arrival, then as long again, 10 s at least): {self.unserved:,} "
                f"request(s) still queued were not served, {n - len(self.rec):,} not yet "
                "sent were dropped",
            )
        elif self.unserved or self.interrupted:
            why = interrupt.reason() if self.interrupted else "stopped"
            yield Notice(
                "warning",
                f"{why}: sending stopped; {self.unserved:,} request(s) still queued were "
                "not served",
            )
        yield timing_done(self.rec, self.warmup_s)
        late = (self.rec.sent - self.rec.scheduled)[: self.sent] * 1e3
        if late.size and float(np.percentile(late, 99)) > LATE_WARN_MS:
            yield Notice(
                "warning",
                f"the traffic generator ran late (p99 {np.percentile(late, 99):.1f} ms "
                "behind schedule): the machine could not send at this rate; latencies "
                "still run from the scheduled times",
            )

    def _elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def cancel(self) -> None:
        """Stop now, from any thread (the engine host closing): nothing more is sent or
        batched, what waits ends unserved, `run()` ends within a report."""
        with self.cond:
            self._abort = True
            self.stop.set()
            self.cond.notify_all()
        self._drained.set()

    def _halt(self, threads: list[threading.Thread]) -> None:
        """Nothing more is sent or batched; every thread is joined. An instance inside the
        engine finishes its batch first: the interpreter must never exit around it."""
        self.stop.set()
        with self.cond:
            self._abort = True
            self.generator_done = True
            self.cond.notify_all()
        for th in threads:
            th.join()

    def _new_samples(self) -> Iterator[Event]:
        """The requests that ended since the last call and those that arrived since and
        still wait, with the batches run since (ServedRequests), and those that completed
        after the warm-up as latency samples (LatencyBatch)."""
        with self.cond:
            if self._admit_due(time.perf_counter() - self.t0):  # the queue as it stands now
                self.cond.notify_all()  # an idle instance takes what arrived
            fresh, self._ended_order = self._ended_order, []
            arrived = np.asarray(self._arrived, np.int64)
            self._arrived = []
            waiting = arrived[~self._has_ended[arrived]]
            self._reported_waiting[waiting] = True
            first = self._batches_reported
            batches = self.batches.since(first)
            self._batches_reported = len(self.batches)
            queued = len(self.queue)
            peak, self._queue_peak = max(self._queue_peak, queued), queued
        rec = self.rec
        origin = int(self.t0 * 1e9)
        ended = np.sort(np.asarray(fresh, np.int64))
        now = time.perf_counter() - self.t0
        start = self.warmup_s + (float(rec.scheduled[0]) if len(rec) and not self.closed else 0)
        keep = (rec.outcome[ended] == OK) & (rec.scheduled[ended] >= start)
        keep &= np.isfinite(rec.done[ended])
        if keep.any():  # before the requests: a commit on them holds both
            yield latency_batch(rec, ended[keep], origin)
        yield served_requests(
            rec, ended, batches, first, origin, (now, queued, peak), waiting=waiting
        )

    def records(self) -> ServeRecords:
        rec = self.rec
        if len(self.batches):
            rec.batch_start, rec.batch_end, rec.batch_size, rec.batch_instance = (
                a.copy() for a in self.batches.since(0)
            )
        rec.check()
        return rec

    # ------------------------------------------------------------------ senders
    def _generator(self) -> None:
        """Sends on schedule; a failure is the run's error (never a traffic thread dead
        while the run goes on and exits 0)."""
        try:
            self._send()
        except BaseException as exc:
            self.error = OpScopeError(f"the traffic generator stopped ({type(exc).__name__}: "
                                      f"{exc}); the requests it sent are recorded")  # fmt: skip
            self.stop.set()
        finally:
            with self.cond:
                self.generator_done = True
                if self.ended >= self.sent:
                    self._drained.set()
                self.cond.notify_all()

    def _send(self) -> None:
        precise_timers()
        short_slice()
        sched = self.rec.scheduled
        t0, n, instances = self.t0, len(sched), self.policy.instances
        while not self.stop.is_set():
            with self.cond:
                while self._busy >= instances and self._next_send < n and not self.stop.is_set():
                    self._parked = True  # an instance about to wait for work wakes it
                    self.cond.wait(PARK_S)  # the instance that frees admits what arrived
                self._parked = False
                j = self._next_send
            if j >= n:
                break
            if not self._wait_until(t0 + float(sched[j])):
                break
            with self.cond:
                if self._next_send == j:  # nobody admitted it meanwhile
                    self._next_send = j + 1
                    self._arrive(j, time.perf_counter() - t0)
                    self.cond.notify_all()

    def _wait_until(self, due: float) -> bool:
        """Sleep until `due` (perf_counter): a long gap stoppable, in steps a timed wait
        takes (one past threading.TIMEOUT_MAX raised OverflowError and killed the traffic
        thread), then the last bit precisely. False when stopped."""
        wait = due - time.perf_counter()
        while wait > PARK_S:
            if self.stop.wait(min(wait - PARK_S, LONG_WAIT_S)):
                return False
            wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        return True

    def _admit_due(self, now: float) -> bool:
        """Under the lock, open loop: every request due by `now` and not yet sent arrives,
        in order, at its scheduled time (see the module's note). Whether any did."""
        if self.closed or self.stop.is_set():  # stopped: nothing more arrives
            return False
        sched, n, first = self.rec.scheduled, len(self.rec), self._next_send
        while self._next_send < n and sched[self._next_send] <= now:
            j = self._next_send
            self._next_send = j + 1
            self._arrive(j, float(sched[j]))
        return self._next_send > first

    def _client(self, c: int) -> None:
        precise_timers()
        short_slice()
        done = self._client_events[c]
        while not self.stop.is_set():
            with self._next_lock:
                j = self._next
                if j >= len(self.rec):
                    return
                self._next += 1
            now = time.perf_counter() - self.t0
            self.rec.scheduled[j] = now  # a closed loop sends when it is ready
            done.clear()
            with self.cond:
                self._owner[j] = c
            self._submit(j, now)
            while not done.wait(0.5):
                if self.stop.is_set():
                    return

    def _submit(self, j: int, now: float) -> None:
        with self.cond:
            self._arrive(j, now)
            self.cond.notify()

    def _arrive(self, j: int, now: float) -> None:
        """Under the lock: request `j` reaches the server at `now`."""
        rec = self.rec
        rec.sent[j] = now
        self.sent += 1
        self._arrived.append(j)
        if self.cache.lookup(self.keys[j]):
            rec.hit[j] = True
            rec.done[j] = now
            self._end(j)
            return
        if self.policy.queue_limit and len(self.queue) >= self.policy.queue_limit:
            rec.outcome[j] = REJECTED
            self._end(j)
            return
        self.queue.append(j)
        if len(self.queue) > self._queue_peak:
            self._queue_peak = len(self.queue)

    def _end(self, j: int) -> None:
        """Under the lock: request `j` has ended (its client may send again)."""
        self.ended += 1
        self._ended_order.append(j)
        self._has_ended[j] = True
        if self.generator_done and self.ended >= self.sent:
            self._drained.set()
        if self.closed:
            self._client_events[self._owner.pop(j)].set()

    # ------------------------------------------------------------------ instances
    def _worker(self, instance: int) -> None:
        precise_timers()
        rec, policy, queue = self.rec, self.policy, self.queue
        buffers: dict[tuple[str, int], np.ndarray] = {}  # this instance's stacking arrays
        timeout = policy.timeout_s
        while True:
            with self.cond:
                while True:
                    if self._abort:  # stopped: what waits stays for _drop_unsent
                        self.cond.notify_all()
                        return
                    now = time.perf_counter() - self.t0
                    self._admit_due(now)
                    while queue and now - rec.scheduled[queue[0]] > timeout:
                        j = queue.popleft()
                        rec.outcome[j] = TIMED_OUT
                        rec.dequeued[j] = now
                        self._end(j)
                    k, wait = take(len(queue), now - rec.sent[queue[0]] if queue else 0.0, policy)
                    if k:
                        members = [queue.popleft() for _ in range(k)]
                        self._busy += 1
                        # starts when the queue was read (every request due by then
                        # arrived before its members left; its time includes stacking)
                        start = now
                        break
                    if self.generator_done and not queue:
                        self.cond.notify_all()
                        return
                    if self._parked:  # this instance waits for work: requests go out on time
                        self.cond.notify_all()
                    self.cond.wait(None if math.isinf(wait) else wait)
            try:
                keys = [self.keys[j] for j in members]
                self.run_batch(stack_requests(self.request_feeds, keys, buffers))
            except BaseException as exc:  # the run stops; what was recorded is kept
                self.error = exc
                self.stop.set()
                self._drained.set()
                with self.cond:
                    self._busy -= 1
                    for j in members:
                        rec.outcome[j] = TIMED_OUT
                        rec.dequeued[j] = start
                        self._end(j)
                    self.generator_done = True
                    self.cond.notify_all()
                return
            end = time.perf_counter() - self.t0
            with self.cond:
                self._admit_due(end)  # arrived during the batch: before its results are cached
                b = len(self.batches)
                self.batches.append(start, end, k, instance)
                for j in members:
                    rec.dequeued[j] = start
                    rec.done[j] = end
                    rec.batch[j] = b
                    self.cache.store(self.keys[j])
                    self._end(j)
                self._busy -= 1

    def _drop_unsent(self) -> None:
        """A stopped run keeps only the requests it sent; those still queued end unserved
        (handed out again only when not yet handed out as waiting: the row is the same)."""
        rec = self.rec
        with self.cond:
            queued = np.fromiter(self.queue, np.int64, len(self.queue))
            self.queue.clear()
            rec.outcome[queued] = UNSERVED
            self._has_ended[queued] = True
            self.ended += queued.size
            self.unserved = int(queued.size)
            self._ended_order.extend(queued[~self._reported_waiting[queued]].tolist())
        sent = np.isfinite(rec.sent)
        self.dropped = int(sent.size - np.count_nonzero(sent))
        if not sent.all():
            for name in ("scheduled", "sent", "dequeued", "done", "batch", "hit", "outcome"):
                setattr(rec, name, getattr(rec, name)[sent])
