"""The live loop as one of the engine host's jobs: each step times one batch of the running
config (about 0.1 s), when the host's phase is TIMING.

Around that it does what the live loop owns: a pause marker while the next config builds
(its timing waits, or the build's CPU time would be in its samples), the running config
again as a new run when that build failed or was cancelled, the built config put in the
running one's place, a run at its cap of samples continued as a new run, the GPU's
throttling flagged when it appears, and the loaded model lent to a job (a load run, a
calibration: `lend`) and timed again after it. Stop ends the running segment and keeps
its config for Start. No Qt, no threads: the host's main loop calls `step`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from engine.config import RunConfig
from engine.events import Event, JobUpdate, Marker
from engine.machine.gpu_telemetry import ThrottleWatch
from engine.run.host_builder import Builder
from engine.run.host_jobs import HostJobs, ThreadJob
from engine.run.host_phases import HostMachine, Phase, Signal
from engine.run.host_workload import HostWorkload
from engine.run.live import LiveRun, Segment, Staged
from engine.run.outbox import Outbox
from engine.run.serving_jobs import LoadedModel

CONTINUED = "timing continued"  # a run that reached its cap of samples goes on in a new one
RESUMED = "timing resumed"  # the same config again after a pause: a new run


@dataclass
class Lent:
    """The loaded model lent to a job on it, timing paused until the job ends."""

    job: ThreadJob
    staged: Staged
    resume: bool  # timing was running when the job began


class LiveJob:
    """The live timing of the running config, stepped by the host's job table."""

    def __init__(
        self,
        machine: HostMachine,
        run: LiveRun,
        builder: Builder,
        out: Outbox,
        throttle: ThrottleWatch,
        renewed: Callable[[], None],
    ) -> None:
        self.run = run
        self._machine, self._builder, self._out = machine, builder, out
        self._throttle = throttle
        self._renewed = renewed  # a built config runs now (its profiling starts over)
        self.stopped: Staged | None = None  # the config that Stop ended, for Start to resume
        self._paused: Segment | None = None  # the segment whose timing waits for a build
        self.lent: Lent | None = None

    @property
    def config(self) -> RunConfig | None:
        """The running config (None while nothing runs)."""
        return self.run.config

    @property
    def loaded(self) -> Staged | None:
        """The config loaded now: the running one, or the one Stop ended."""
        return self.run.segment.staged if self.run.segment is not None else self.stopped

    @property
    def busy(self) -> bool:
        """Timing: the host's loop goes round at once, without waiting for commands."""
        return self.run.segment is not None and self._machine.phase is Phase.TIMING

    def step(self) -> None:
        if self._machine.phase in (Phase.PROFILING, Phase.CLOSING):
            return
        self._watch_build()
        if self.lent is not None:
            if not self.lent.job.done.is_set():
                return  # a job holds the model: no build replaces it meanwhile
            self._given_back(self.lent)
        self._take_build()
        if self._machine.phase is Phase.TIMING:
            self._time()

    # the window's commands ----------------------------------------------------------------
    def start(self) -> None:
        """Start: a new run of the config that Stop ended."""
        stopped, self.stopped = self.stopped, None
        if stopped is not None and self.run.segment is None:
            self._throttle.reset()
            self._drain(self.run.begin(dataclasses.replace(stopped, label=RESUMED)))

    def stop(self) -> None:
        """Stop: the running segment ends (its run closed), its config kept for Start."""
        if self.run.segment is not None:
            self.stopped = self.run.segment.staged
            self._drain(self.run.end())

    def lend(self, job_id: int, request: object, jobs: HostJobs, work: HostWorkload) -> None:
        """Start a job on the model now loaded (a load run, a calibration), timing paused;
        refused in one line while another holds it or before a model is loaded."""
        if self.lent is not None:
            why = "a load run or calibration is still going: stop it first"
            self._out.put(JobUpdate(job_id, "failed", why))
            return
        staged = self.loaded
        if staged is None or work.model is None:
            self._out.put(JobUpdate(job_id, "failed", "no model is loaded yet"))
            return
        resume = self.run.segment is not None and self._machine.mode.timing_on
        if self.run.segment is not None:
            self._drain(self.run.end())
        self.stopped = None
        request_at = work.request(staged.config)
        model = LoadedModel(staged.prepared, work.model, staged.facts, request_at, self._out.put)
        jobs.start(job_id, request, model)
        job = jobs.get(job_id)
        if isinstance(job, ThreadJob):
            self.lent = Lent(job, staged, resume)
            self._machine.signal(Signal.SERVE)
        else:  # it could not start: timing goes on as it was
            self.stopped = staged
            if resume:
                self._drain(self.run.begin(dataclasses.replace(staged, label=RESUMED)))

    def end(self) -> None:
        """The host ends: the running segment's run closed (sent with the last batch)."""
        for ev in self.run.end():
            self._out.put(ev)

    # the loop's parts ---------------------------------------------------------------------
    def _watch_build(self) -> None:
        building = self._builder.building
        seg = self.run.segment
        if building and self._paused is None and seg is not None and self._machine.mode.timing_on:
            self._paused = seg
            label = f"preparing {self._builder.label}"
            self._out.put(Marker("pause", label, time.perf_counter_ns()))
        elif not building and self._paused is not None:
            if seg is not None and seg is self._paused and not self._builder.has_result:
                # failed or cancelled: the same config again, a new run (no gap in its
                # throughput)
                resumed = dataclasses.replace(seg.staged, label=RESUMED)
                self._drain(self.run.end())
                self._drain(self.run.begin(resumed))
            self._paused = None
        if not building and self._machine.mode.building:
            self._machine.signal(Signal.BUILD_ENDED)

    def _given_back(self, lent: Lent) -> None:
        self.lent = None
        if lent.resume and self._machine.mode.timing_on:
            self._throttle.reset()
            self._drain(self.run.begin(dataclasses.replace(lent.staged, label=RESUMED)))
        else:
            self.stopped = lent.staged
        self._machine.signal(Signal.SERVED)

    def _take_build(self) -> None:
        staged = self._builder.take()
        if staged is None:
            return
        old = self.loaded
        self._drain(self.run.end())
        self._throttle.reset()  # a new run: its own throttling
        self._drain(self.run.begin(staged))
        self.stopped = None  # Start resumes the config now loaded, not that one
        if old is not None and old.prepared is not staged.prepared:
            _retire(old)
        self._renewed()
        self._machine.signal(Signal.BUILT)

    def _time(self) -> None:
        run = self.run
        if run.segment is None:
            return
        ev = run.step()
        if ev is not None:
            self._out.put(ev)
            for extra in run.extra_events():
                self._out.put(extra)
        if run.full and run.segment is not None:  # bounded: a new run goes on
            continued = dataclasses.replace(run.segment.staged, label=CONTINUED)
            self._drain(run.begin(continued))
        flagged = self._throttle.fresh()
        if flagged is not None:
            self._out.put(flagged)

    def _drain(self, events: Iterator[Event]) -> None:
        for ev in events:
            self._out.put(ev)
        self._out.flush(force=True)


def _retire(staged: Staged) -> None:
    """A config replaced by another: its session closed, its variant's cache entry no
    longer held (so the cache may evict it)."""
    with contextlib.suppress(Exception):  # a backend's close must never stop the host
        staged.prepared.close()
