"""The recorder: consumes a run's events and writes them to a session file.

It depends only on the events (never on the engine objects behind them), so the CLI runs
it in-process and the desktop app runs it on the events its engine host sends over. Raw
latency samples are buffered and committed once FLUSH_INTERVAL_S has passed; batches come
every ~0.1 s (a serving run's requests every 0.25 s), so commits are at most ~0.3 s apart
and a crash or `kill -9` loses about the last half second at most (0.2 s more than
0.4 s cost nothing measurable: 60 s of a 2,000 samples/s bench recorded in 0.8-1.0 s
either way). Everything else is committed as it arrives. A run killed mid-way
keeps status "running".

Another process holding the file's lock (SQLITE_BUSY) does not stop a run: every write
waits in an ordered queue in memory, retried every LOCK_RETRY_S, and lands when the lock
goes; `close()` waits up to a grace period, then counts what it could not save.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from engine.config import RunConfig
from engine.errors import SessionFileError
from engine.events import (
    AccuracyResult,
    CommandFailed,
    ContentionSample,
    Event,
    GenerationStarted,
    GenerationSteps,
    GenerationSummary,
    LatencyBatch,
    Marker,
    ModelLoaded,
    Notice,
    OpProfile,
    RunEnded,
    RunStarted,
    ServedRequests,
    ServingStarted,
    ServingSummary,
    Telemetry,
    TimingDone,
    VariantReady,
)
from engine.measure.contention import Contention, combine
from engine.session.generation_rows import add_steps, set_generation_summary, start_generation
from engine.session.origins import write_origin
from engine.session.store import SessionStore
from engine.session.trust import json_text
from engine.session.write_queue import (
    LOCK_GRACE_S,
    LOCK_WAIT_S,
    LockWait,
    WriteQueue,
)

FLUSH_INTERVAL_S = 0.2  # the serving loop reports every 0.25 s: each report commits


class Recorder:
    """Feed it every event (`rec.feed(ev)`): one run (the CLI) or a stream of runs (the live
    engine: each RunStarted..RunEnded is a run; telemetry and markers go to the current
    run). When a run raises instead of yielding RunEnded, mark it with `fail` or `cancel`;
    `close()` flushes. A recorder started mid-run records from the next RunStarted on.
    Events carry `time.perf_counter_ns()` stamps (a monotonic clock
    shared by the processes of one host); the file stores wall-clock ns, converted with one
    offset measured when the recorder starts."""

    def __init__(
        self,
        store: SessionStore,
        *,
        model_path: str = "",
        kind: str = "bench",
        config: RunConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
        notify: Callable[[str], None] | None = None,
        origin: dict[str, Any] | None = None,
    ) -> None:
        self.store = store
        self.model_path = model_path
        self.kind = kind
        # who makes the next run (engine/session/origins.py: a tune's trial, a sweep's
        # point; a sweep sets it before each point), recorded with its row; None: its kind
        self.origin = origin
        self.config = config  # as requested; RunStarted brings the resolved one
        self.run_id: int | None = None  # the current (or last) run
        # the file's id of each run opened, by the order it was opened in (0, 1, ...),
        # once its row is written (the window's Runs dock shows the file's ids)
        self.opened = 0
        self.run_ids: dict[int, int] = {}
        self._clock = clock
        self._wall_offset = time.time_ns() - time.perf_counter_ns()
        self._active = False  # a run row is open (started, not ended)
        self._expect_run = True  # run facts seen since the last run ended
        self._model_sha: str | None = None
        self._variant: VariantReady | None = None
        self._notices: list[Notice] = []
        self._machine: dict[str, str | None] | None = None  # the next run's machine facts
        self._starts: list[np.ndarray] = []
        self._lats: list[np.ndarray] = []
        self._telemetry: list[tuple[bool, int, str, float]] = []  # (in the run, ...)
        # the current run's windows of machine load, folded as they come (one every 1.1 s:
        # kept one by one, an hour's run held 3,000 of them until its end)
        self._load: Contention | None = None
        self._load_saved = False  # its summary came with TimingDone
        self._served: list[ServedRequests] = []
        self._serving = False  # the current run has a serving row
        self._steps: list[GenerationSteps] = []
        self._generating = False  # the current run has a generation row
        self._generations = 0  # GenerationSteps seen in it
        self._next_index = 0
        self._origin_wall: int | None = None  # wall ns of the current run's start_ns == 0
        self._origin_saved = False
        self._serving_origin_saved = False
        self._last_commit = clock()
        self.saved_samples = 0  # latency samples committed in the current run
        self.saved_requests = 0  # serving requests committed (rows, some rewritten later)
        self.saved_until_s = 0.0  # the latest scheduled time among them
        self.marked_after_break = False  # a broken file still got the run's end
        # every write, in order; one line to `notify` when the file locks and frees
        self.writes = WriteQueue(store.path, clock=clock, notify=notify)
        store.set_busy_timeout(LOCK_WAIT_S)

    @property
    def waiting(self) -> LockWait | None:
        """Set while another process holds the file's lock and writes wait in memory."""
        return self.writes.waiting(sum(int(a.size) for a in self._lats))

    @property
    def unsaved(self) -> int:
        """Samples that could not be saved (the lock outlived its grace; a full disk)."""
        return self.writes.unsaved

    @property
    def active(self) -> bool:
        """A run is open: started, and not yet ended by an event, `fail` or `cancel`."""
        return self._active

    def feed(self, ev: Event) -> None:
        if isinstance(ev, LatencyBatch):
            self._latency(ev)
        elif isinstance(ev, Telemetry):
            wall = ev.t_ns + self._wall_offset
            active = self._active
            self._telemetry.extend((active, wall, k, float(v)) for k, v in ev.values.items())
        elif isinstance(ev, ContentionSample):
            self._contention(ev)
        elif isinstance(ev, ModelLoaded):
            self._expect_run = True
            info = ev.info
            self._model_sha = info.sha256
            self._write(lambda: self.store.upsert_model(info))
            self.model_path = info.path
        elif isinstance(ev, VariantReady):
            self._expect_run = True
            self._variant = ev
        elif isinstance(ev, Notice):
            if self._active:
                self._notice(ev)
            else:
                self._notices.append(ev)
        elif isinstance(ev, Marker):
            self._marker(ev.kind, ev.label, "", ev.t_ns + self._wall_offset)
        elif isinstance(ev, CommandFailed):
            self._marker("command_failed", ev.command, ev.message, time.time_ns())
        elif isinstance(ev, RunStarted):
            self._start(ev)
        elif isinstance(ev, ServedRequests):
            if self._active and self._serving:
                self._served.append(ev)
        elif isinstance(ev, ServingStarted | ServingSummary):
            self._serving_fact(ev)
        elif isinstance(ev, GenerationSteps):
            if self._active and self._generating:
                if ev.index < 0:  # numbered here (the live engine's are not)
                    ev = dataclasses.replace(ev, index=self._generations)
                self._generations = max(self._generations, ev.index + 1)
                self._steps.append(ev)
        elif isinstance(ev, GenerationStarted | GenerationSummary):
            self._generation_fact(ev)
        elif isinstance(ev, TimingDone | AccuracyResult | OpProfile):
            self._run_fact(ev)
        elif isinstance(ev, RunEnded) and self._active:  # else: begun before this recorder
            self._end(ev.status, ev.error)
        if self._clock() - self._last_commit >= FLUSH_INTERVAL_S:
            self.flush()

    def feed_many(self, events: Iterable[Event]) -> None:
        """For a sink that receives batches of events (the GUI's engine client)."""
        for ev in events:
            self.feed(ev)

    def flush(self) -> None:
        """Commit buffered samples, telemetry and the run's sample count in one transaction
        (queued behind earlier writes while the file is locked)."""
        self._last_commit = self._clock()
        starts, telemetry = self._starts, self._telemetry
        lats = self._lats if self._active else []
        served = self._served if self._active else []
        steps = self._steps if self._active else []
        self._starts, self._lats, self._telemetry = [], [], []
        self._served, self._steps = [], []
        if lats or telemetry or served or steps:  # taken before a write can raise
            self._queue_samples(starts, lats, telemetry, served, steps)
        self.writes.drain()
        self._last_commit = self._clock()

    def _queue_samples(
        self,
        starts: list[np.ndarray],
        lats: list[np.ndarray],
        telemetry: list[tuple[bool, int, str, float]],
        served: list[ServedRequests],
        steps: list[GenerationSteps],
    ) -> None:
        """One write holding this flush's data; what belongs to the run (its id, the index
        of its first sample, whether it saves the origin) is settled now, in order."""
        first = self._next_index
        n = sum(int(a.size) for a in lats)
        self._next_index += n
        origin = None
        if lats and not self._origin_saved and self._origin_wall is not None:
            origin = self._origin_wall
            self._origin_saved = True
        serving_origin = 0
        if served and not self._serving_origin_saved:
            serving_origin = next((c.origin_ns for c in served if c.origin_ns), 0)
            self._serving_origin_saved = bool(serving_origin)

        def write() -> None:
            run_id = self.run_id
            until = self.saved_until_s
            with self.store.transaction():
                if steps and run_id is not None:
                    add_steps(self.store.db.conn, run_id, steps)
                if served and run_id is not None:
                    for chunk in served:
                        self.store.add_served(run_id, chunk)
                        if chunk.scheduled.size:
                            last = float(np.nanmax(chunk.scheduled))
                            until = max(until, last)
                    if serving_origin:
                        self.store.set_serving_origin(run_id, serving_origin + self._wall_offset)
                if lats and run_id is not None:
                    one = len(lats) == 1
                    self.store.add_latency(
                        run_id,
                        first,
                        starts[0] if one else np.concatenate(starts),
                        lats[0] if one else np.concatenate(lats),
                    )
                    fields: dict[str, Any] = {"samples": first + n}
                    if origin is not None:
                        fields["timing_origin_ns"] = origin
                        self.store.set_marker_offsets(run_id, origin)
                    self.store.update_run(run_id, fields)
                if telemetry:
                    self.store.add_telemetry_rows(
                        [(run_id if in_run else None, t, k, v) for in_run, t, k, v in telemetry]
                    )
            self.saved_samples, self.saved_until_s = first + n, until  # committed
            self.saved_requests += sum(int(c.index.size) for c in served)

        self.writes.put(write, n)

    def _write(self, write: Callable[[], object]) -> None:
        """Queue `write` as a transaction of its own (committed, or rolled back whole when
        the file is locked, to be tried again)."""

        def committed() -> None:
            with self.store.transaction():
                write()

        self.writes.put(committed)

    def settle(self, grace_s: float = LOCK_GRACE_S) -> bool:
        """Flush, and wait up to `grace_s` for a lock to go; True when everything is saved
        (a sweep reads the run's id and writes itself after this)."""
        self.flush()
        return self.writes.settle(grace_s)

    def fail(self, error_text: str) -> None:
        """The run raised: keep what was recorded and mark it 'error' with the message."""
        self._end("error", error_text)

    def cancel(self, reason: str = "cancelled by the user") -> None:
        self._end("cancelled", reason)

    def close(self, grace_s: float = LOCK_GRACE_S) -> None:
        """Flush; a run still open is marked cancelled (nothing ended it). Waits up to
        `grace_s` for a lock held by another process; what still cannot be written is
        dropped and its samples counted in `unsaved`."""
        if self._active:
            self._end("cancelled", "recording closed before the run ended")
        if not self.settle(grace_s) and self.writes.broken is None:
            self.writes.give_up(grace_s)

    def _latency(self, ev: LatencyBatch) -> None:
        if not self._active:
            return  # samples outside a run have nowhere to go
        if self._origin_wall is None and ev.latencies_ns.size:
            if ev.origin_ns:
                self._origin_wall = ev.origin_ns + self._wall_offset
            else:  # an event without its origin: it was yielded as its last sample ended
                last_end = int(ev.starts_ns[-1]) + int(ev.latencies_ns[-1])
                self._origin_wall = time.time_ns() - last_end
        self._starts.append(ev.starts_ns)
        self._lats.append(ev.latencies_ns)

    def _start(self, ev: RunStarted) -> None:
        if self._active:
            self._end("cancelled", "a new run started before this one ended")
        fields: dict[str, Any] = {
            "config": json_text(ev.config.to_json()),
            "provider_requested": ev.provider_requested,
            "provider_used": ev.provider_used,
            "providers": json_text(list(ev.providers)),
            "inputs": json_text(
                {k: {"shape": list(s), "dtype": d} for k, (s, d) in ev.inputs.items()}
            ),
            "batch": ev.batch,
            "session_create_s": ev.session_create_s,
            **({"host": ev.host} if ev.host else {}),  # else the session's own machine
        }
        self._machine = ev.machine
        self._open_run(fields)

    def _open_run(self, fields: dict[str, Any]) -> None:
        fields = {
            "kind": self.kind,
            "model_sha256": self._model_sha,
            "model_path": self.model_path,
            "variant": _variant_json(self._variant) if self._variant else None,
            **fields,
        }
        self.flush()
        notices = list(self._notices)

        machine = (fields.get("host"), self._machine)
        self._machine = None
        order, self.opened = self.opened, self.opened + 1
        origin = self.origin

        def write() -> None:
            with self.store.transaction():
                if machine[0] and machine[1]:
                    self.store.note_machine(machine[0], machine[1])
                self.run_id = self.run_ids[order] = self.store.start_run(fields)
                if origin is not None:
                    write_origin(self.store.db.conn, self.run_id, origin)
                for notice in notices:
                    self.store.add_marker(self.run_id, "notice", notice.level, notice.message)

        self._active = True
        self._write(write)
        self._notices.clear()
        self._next_index = 0
        self._origin_wall = None
        self._origin_saved = False
        self._serving = False
        self._serving_origin_saved = False
        self._served.clear()
        self._generating = False
        self._generations = 0
        self._steps.clear()
        self._load = None
        self._load_saved = False
        self._last_commit = self._clock()

    def _serving_fact(self, ev: ServingStarted | ServingSummary) -> None:
        """A serving run's set-up (opens its serving row) or its figures at the end."""
        if not self._active:
            return
        self.flush()
        if isinstance(ev, ServingStarted):

            def write() -> None:
                run_id = self._require_run()
                with self.store.transaction():
                    self.store.start_serving(run_id, ev)
                    kind = "simulate" if ev.simulated else "load"
                    self.store.update_run(run_id, {"kind": kind})

            self._serving = True
            self._write(write)
        elif self._serving:
            summary = ev
            self._write(
                lambda: self.store.set_serving_summary(
                    self._require_run(), summary.summary, summary.answers
                )
            )

    def _generation_fact(self, ev: GenerationStarted | GenerationSummary) -> None:
        """A generation run's shape (opens its generation row) or its figures at the end."""
        if not self._active:
            return
        self.flush()
        if isinstance(ev, GenerationStarted):
            started = ev
            self._generating = True
            self._write(lambda: start_generation(self.store.db.conn, self._require_run(), started))
        elif self._generating:
            summary = ev.summary
            self._write(
                lambda: set_generation_summary(self.store.db.conn, self._require_run(), summary)
            )

    def _end(self, status: str, error: str | None) -> None:
        if not self._active:
            if not self._expect_run:
                return  # the last run already ended; nothing is pending
            # failed before RunStarted: still a run, with what we know
            config = json_text(self.config.to_json()) if self.config else None
            self._open_run({"config": config})
        load = self._load if not self._load_saved else None
        if load is not None and self.writes.broken is None:
            self._write(lambda: self.store.set_contention(self._require_run(), load))
        with contextlib.suppress(SessionFileError):  # said by whoever met it first
            self.flush()
        if self.writes.broken is not None:
            self._mark_broken(status, error)
        else:
            self._write(lambda: self.store.end_run(self._require_run(), status, error))
        self._active = False
        self._expect_run = False
        self._variant = None

    def _mark_broken(self, status: str, error: str | None) -> None:
        """The file refused a write for good (a full disk): try once to mark the run
        anyway (a full disk often still takes it: the failed write's space in the -wal is
        free again), so it does not read `running`."""
        if self.run_id is None:
            return
        with contextlib.suppress(sqlite3.Error):  # a 2 MB tmpfs refuses even this
            self.store.end_run(self.run_id, status, error)
            self.marked_after_break = True

    def saved_line(self) -> str:
        """What a broken recording kept, honestly: committed before the failure."""
        parts = [f"{self.saved_samples:,} latency samples"]
        if self.saved_requests:
            parts.append(f"requests scheduled up to {self.saved_until_s:.1f} s of the run")
        mark = "marked" if self.marked_after_break else "could not be marked (it reads interrupted)"
        return f"kept {', '.join(parts)}; the run {mark}"

    def _contention(self, ev: ContentionSample) -> None:
        """A window of the machine's load: kept for the run's summary, and as telemetry
        rows (`others_cpu`, `steal_cpu`, `clock_ratio`) on the recording's timeline."""
        c = ev.contention
        if self._active:
            self._load = combine([self._load, c] if self._load is not None else [c])
        wall = ev.t_ns + self._wall_offset
        rows = [("others_cpu", c.others_cpu), ("steal_cpu", c.steal)]
        if c.clock_ratio is not None:
            rows.append(("clock_ratio", c.clock_ratio))
        self._telemetry.extend((self._active, wall, k, float(v)) for k, v in rows)

    def _notice(self, ev: Notice) -> None:
        self._write(
            lambda: self.store.add_marker(self._require_run(), "notice", ev.level, ev.message)
        )

    def _marker(self, kind: str, label: str, text: str, wall_ns: int) -> None:
        active = self._active
        t_ns = wall_ns - self._origin_wall if active and self._origin_wall else None
        self._write(
            lambda: self.store.add_marker(
                self.run_id if active else None, kind, label, text, t_ns=t_ns, wall_ns=wall_ns
            )
        )

    def _run_fact(self, ev: TimingDone | AccuracyResult | OpProfile) -> None:
        """Outside a run (a recorder started mid-run) these have no row to go to: dropped."""
        if not self._active:
            return
        self.flush()
        if isinstance(ev, TimingDone):
            done = ev
            self._load_saved = done.contention is not None
            self._write(lambda: self.store.set_timing(self._require_run(), done))
        elif isinstance(ev, AccuracyResult):
            acc = ev
            self._write(lambda: self.store.set_accuracy(self._require_run(), acc))
        else:
            prof = ev
            self._write(lambda: self.store.add_profile(self._require_run(), prof))

    def _require_run(self) -> int:
        assert self.run_id is not None, "a run row exists once _open_run ran"
        return self.run_id


def _variant_json(v: VariantReady) -> str:
    return json_text(
        {
            "precision": v.precision,
            "path": v.path,
            "build_s": v.build_s,
            "cached": v.cached,
            "nodes": v.nodes,
            "nodes_original": v.nodes_original,
            "details": v.details,
        }
    )
