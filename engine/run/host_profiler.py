"""The engine host's profiling passes, a job of the host's table: when a pass is due (a new
config once its first timing window is in, Profile Now, or the background schedule), the
running config is profiled with its timing paused, one event a step, then the machine's
peaks are looked after (engine/run/host_peaks.py). Timing comes first: a new config's
first latency points reach the window in the time its warm-up and one batch take, not
after a pass and a peaks measurement (18-28 s on the demo model when the pass came
first). Commands that come meanwhile wait for the pass to end (engine/run/host_phases.py),
but Shutdown: the pass is dropped, and a peaks measurement going stops part-way."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from engine.errors import OpScopeError
from engine.events import CommandFailed, Event, OpProfile
from engine.run.host_peaks import peaks_if_missing
from engine.run.host_phases import HostMachine, Phase, Signal
from engine.run.live import LiveRun
from engine.run.outbox import Outbox

PROFILE_EVERY_S = 30.0  # the first background pass after a config's own
PROFILE_MAX_EVERY_S = 240.0  # passes of an unchanged config back off to this
FIRST_PASS_AFTER_S = 1.0  # a new config's own pass: after this much of its timing


def next_profile_interval(every_s: float) -> float:
    """Background passes of one config come at 30, 60, 120, 240 s, then every 240 s: each
    pauses timing for seconds (a 323-node detector: 5-7 s) and an unchanged config's op
    times change little; a config change or Profile Now profiles at once."""
    return min(2.0 * every_s, PROFILE_MAX_EVERY_S)


@dataclass
class PeaksMemo:
    """What the host remembers about the machine's peaks (engine/run/host_peaks.py)."""

    peaks_tried: bool = False
    peaks_sent: bool = False  # the window has this host's peaks
    peaks_retry_at: float = 0.0  # provisional peaks: when to look for a quiet moment again


def profile_events(run: LiveRun) -> Iterator[Event]:
    """One profiling pass of the running config: its events, the per-node stats among them."""
    return run.profile()


class Profiler:
    """Schedules the profiling passes of the running config and steps the one going."""

    def __init__(self, machine: HostMachine, run: LiveRun, out: Outbox) -> None:
        self._machine, self._run, self._out = machine, run, out
        self.due = False  # a pass at the next timing step
        self.first = False  # a new config's pass, once its first timing window is in
        self.last = 0.0  # when the last pass began (time.monotonic)
        self.every = PROFILE_EVERY_S
        self.peaks = PeaksMemo()
        self._pass: Iterator[Event] | None = None
        self._ops: list[Any] | None = None  # the pass's per-node stats
        # whether the host was told to end (or its window went away) while a pass's peaks
        # are measured: the measurement stops part-way (set by host_main)
        self.stop_asked: Callable[[], bool] = lambda: False

    def now(self) -> None:
        """Profile Now."""
        self.due = True

    def renew(self) -> None:
        """A new config runs: profiled after its first FIRST_PASS_AFTER_S of timing (its
        first points come first), then on the schedule from that pass."""
        self.first = True
        self.every = PROFILE_EVERY_S

    @property
    def busy(self) -> bool:
        return self._pass is not None

    def step(self) -> None:
        if self._pass is not None:
            self._advance(self._pass)
            return
        if self._machine.phase is not Phase.TIMING or self._run.segment is None:
            return
        now = time.monotonic()
        if self.first and not self.due:
            if self._timed_s() < FIRST_PASS_AFTER_S:
                return  # the new config's first points first
            self.due = True
        if not self.due and now - self.last <= self.every:
            return
        if not self.due:  # a background pass: the next comes later
            self.every = next_profile_interval(self.every)
        self.due = self.first = False
        self.last = now
        self._machine.signal(Signal.PROFILE_DUE)
        self._pass, self._ops = profile_events(self._run), None
        self._advance(self._pass)

    def _timed_s(self) -> float:
        """How long the running config has been timed (its samples' span so far)."""
        seg = self._run.segment
        if seg is None or not seg.origin_ns or not len(seg.samples):
            return 0.0
        return (time.perf_counter_ns() - seg.origin_ns) / 1e9

    def end(self) -> None:
        """The host ends: a pass going is dropped."""
        if self._pass is not None:
            close = getattr(self._pass, "close", None)
            if close is not None:
                close()
            self._pass = None

    def _advance(self, events: Iterator[Event]) -> None:
        try:
            ev = next(events)
        except StopIteration:
            self._finish()
            return
        except OpScopeError as exc:
            self._out.put(CommandFailed("profile", str(exc)))
            self._finish()
            return
        if isinstance(ev, OpProfile):
            self._ops = ev.ops
        self._out.put(ev)
        self._out.flush(force=True)  # the window sees the pass as it goes

    def _finish(self) -> None:
        self._pass = None
        peaks_if_missing(self._run, self.peaks, self._out, self._ops, self.stop_asked)
        self._machine.signal(Signal.PROFILED)
