"""The engine host's states and transitions, declared in one place.

The host is in one `Phase` at a time: what its main loop does now. A phase follows from a
`Mode`, the few facts a command or a job's end changes (a model loaded, timing wanted, a
build or a job on the model going, a profiling pass, closing), and `transition` is the one
place a `Signal` changes them: a command from the window (Load, Stop, ...) or what one of
the host's jobs reports (a build done, a pass ended, the window gone).

    IDLE ──BUILD──> LOADING ──BUILT, BUILD_ENDED──> TIMING ──PROFILE_DUE──> PROFILING
      TIMING ──STOP──> PAUSED ──START──> TIMING       PROFILING ──PROFILED──> TIMING
      TIMING, PAUSED ──SERVE──> SERVING ──SERVED──> TIMING (or PAUSED after a Stop)
      any ──SHUTDOWN, CLOSED──> CLOSING

A command that comes during a profiling pass waits for the pass to end (`transition`
answers None): the pass is a few seconds of the running config's, and a Stop or a Load
applies to the config the pass ends on. Shutdown does not wait: the pass is dropped and
the run ends now (a big model's pass on a busy machine outlasted the window's wait for
its host, which then killed it, its run unended). No Qt, no threads: a pure function of its inputs.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass


class Phase(enum.Enum):
    IDLE = "idle"  # nothing built yet: no config to time
    LOADING = "loading"  # a config builds; the running one's timing waits for it
    TIMING = "timing"  # the live loop times the running config
    PAUSED = "paused"  # a config is loaded and timing is off (Stop), Start resumes it
    SERVING = "serving"  # a job on the loaded model (a load run, a calibration) holds it
    PROFILING = "profiling"  # a profiling pass of the running config, timing paused
    CLOSING = "closing"  # Shutdown, or the window went away: the host ends


class Signal(enum.Enum):
    # the window's commands
    BUILD = "build"  # Load, Apply, SetInputs or GenerationShape: a config builds
    CANCEL = "cancel"  # the newest build stops at its next progress point
    START = "start"
    STOP = "stop"
    PROFILE = "profile"  # a pass at the next timing step
    SERVE = "serve"  # a job on the loaded model began
    JOB = "job"  # a job of its own process started or cancelled: no phase changes
    SHUTDOWN = "shutdown"
    # what the host's jobs report
    BUILT = "built"  # a built config replaced the running one
    BUILD_ENDED = "build ended"  # no build works any more (done, failed or cancelled)
    SERVED = "served"  # the job on the loaded model ended
    PROFILE_DUE = "profile due"  # the profiler's schedule: a pass now
    PROFILED = "profiled"  # the pass ended
    CLOSED = "closed"  # the window's end of the pipe closed


COMMANDS = frozenset(
    {Signal.BUILD, Signal.CANCEL, Signal.START, Signal.STOP, Signal.PROFILE, Signal.SERVE,
     Signal.JOB, Signal.SHUTDOWN}
)  # fmt: skip


@dataclass(frozen=True)
class Mode:
    """The facts the host's phase follows from; changed by `transition` only."""

    loaded: bool = False  # a config was built (running, stopped, or lent to a job)
    timing_on: bool = True  # Start/Stop: the live loop may time
    building: bool = False  # a build works (a superseded one too, until it stops)
    serving: bool = False  # a job on the loaded model holds it
    profiling: bool = False
    closing: bool = False

    @property
    def phase(self) -> Phase:
        if self.closing:
            return Phase.CLOSING
        if self.profiling:
            return Phase.PROFILING
        if self.serving:
            return Phase.SERVING
        if self.building:  # timing waits: a build beside it would be in its samples
            return Phase.LOADING
        if not self.loaded:
            return Phase.IDLE
        return Phase.TIMING if self.timing_on else Phase.PAUSED


def transition(mode: Mode, signal: Signal) -> Mode | None:
    """The mode after `signal`; None: not now (a command during a profiling pass waits
    for its end, then comes again)."""
    change = dataclasses.replace
    match mode.phase, signal:
        case Phase.CLOSING, _:
            return mode  # the host ends: nothing changes it any more
        case _, Signal.CLOSED:
            return change(mode, closing=True)
        case Phase.PROFILING, Signal.PROFILED:
            return change(mode, profiling=False)
        case _, Signal.SHUTDOWN:  # a pass going is dropped (Profiler.end), not waited for
            return change(mode, closing=True)
        case Phase.PROFILING, command if command in COMMANDS:
            return None
        case Phase.TIMING, Signal.PROFILE_DUE:
            return change(mode, profiling=True)
        case _, Signal.PROFILE_DUE | Signal.PROFILED:
            return mode  # a pass is of a running config only
        case _, Signal.BUILD:
            return change(mode, building=True)
        case _, Signal.BUILD_ENDED:
            return change(mode, building=False)
        case _, Signal.BUILT:
            return change(mode, loaded=True)
        case _, Signal.START:
            return change(mode, timing_on=True)
        case _, Signal.STOP:
            return change(mode, timing_on=False)
        case _, Signal.SERVE:
            return change(mode, serving=True)
        case _, Signal.SERVED:
            return change(mode, serving=False)
        case _, Signal.CANCEL | Signal.PROFILE | Signal.JOB:
            return mode  # the builder, the profiler's schedule and the job table take these
    raise AssertionError(f"no transition for {signal} in {mode.phase}")  # pragma: no cover


class HostMachine:
    """The host's current mode, moved by `signal` only."""

    def __init__(self) -> None:
        self.mode = Mode()

    @property
    def phase(self) -> Phase:
        return self.mode.phase

    def accepts(self, signal: Signal) -> bool:
        """Whether `signal` applies now (a command in a profiling pass waits)."""
        return transition(self.mode, signal) is not None

    def signal(self, signal: Signal) -> bool:
        """Apply `signal`; False when it must wait (the caller keeps it for later)."""
        moved = transition(self.mode, signal)
        if moved is None:
            return False
        self.mode = moved
        return True
