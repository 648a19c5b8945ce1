"""The window's hang alarm listens for the engine host's heartbeats (a fake clock, the view
and the client replaced by doubles): a host busy in a long profile or calibration keeps
beating and is never called hung; one whose beats stop is, in words that say so."""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

import numpy as np
import pytest

pytest.importorskip("PySide6")
from PySide6.QtCore import QObject, Signal

from app.live.live_controller import HANG_AFTER_S, LiveController
from engine.config import RunConfig
from engine.events import Heartbeat, LatencyBatch, Marker, Progress, RunStarted, Telemetry


class Client(QObject):
    events = Signal(list)
    host_died = Signal(str)
    last_config = RunConfig()


class Clock:
    """perf_counter_ns's stand-in, moved by hand."""

    def __init__(self) -> None:
        self.s = 100.0

    def __call__(self) -> int:
        return int(self.s * 1e9)


def _timing(clock: Clock) -> tuple[LiveController, Any]:
    """A controller whose engine started a run and sent its first samples."""
    view = MagicMock()
    c = LiveController(view, Client(), clock=clock)
    started = RunStarted(RunConfig(), "cpu", "CPUExecutionProvider", (), {}, 8, 0.1)
    samples = LatencyBatch(np.array([0]), np.array([1_266_000_000]), origin_ns=clock())
    c.on_events([started, samples])
    return c, view


def test_a_host_busy_profiling_keeps_beating_and_is_not_hung() -> None:
    """Batch 8 under load: a profiling pass, then a calibration, no samples for minutes
    (the false alarm came twice): heartbeats and telemetry arrive, no alarm."""
    clock = Clock()
    c, view = _timing(clock)
    c.on_events([Marker("profile", "profiling", clock())])
    for k in range(240):  # four minutes of a long native call, one beat a second
        clock.s += 1.0
        batch: list[Any] = [Heartbeat(k + 1)]
        if k % 10 == 0:
            batch.append(Telemetry(clock(), {"cpu_percent": 100.0}))
        if k == 120:
            batch.append(Progress("calibration", 1, 8, "calibrating"))
        c.on_events(batch)
        assert not c.check_hang()
    view.host_hung.assert_not_called()


def test_heartbeats_that_stop_raise_the_alarm_and_beats_clear_it() -> None:
    clock = Clock()
    c, view = _timing(clock)
    c.on_events([Heartbeat(1)])
    clock.s += HANG_AFTER_S - 1
    assert not c.check_hang()
    clock.s += 2  # SIGSTOP, or a native call that holds the GIL: nothing beats
    assert c.check_hang()
    (why,), _ = view.host_hung.call_args
    assert why.startswith(f"no heartbeat from the engine host for {HANG_AFTER_S + 1:.0f} s")
    assert not c.check_hang()  # said once
    c.on_events([Heartbeat(2)])  # SIGCONT: it beats again
    view.notices.clear.assert_called_with("engine-hung")
    assert not c.check_hang()


def test_a_host_not_heard_from_yet_or_dead_is_not_called_hung() -> None:
    """A remote host may still be receiving its model before it first beats; a host that
    died is reported as dead (host_died), not as hung; a fresh host starts unjudged."""
    clock = Clock()
    view = MagicMock()
    c = LiveController(view, Client(), clock=clock)
    clock.s += 10 * HANG_AFTER_S
    assert not c.check_hang()
    c.on_events([Heartbeat(1)])
    c.on_host_died("the engine host crashed")
    clock.s += 10 * HANG_AFTER_S
    assert not c.check_hang()
    c.on_events([Heartbeat(1)])
    c.host_started()  # a restart: the old host's last beat says nothing of the new one
    clock.s += 10 * HANG_AFTER_S
    assert not c.check_hang()
    view.host_hung.assert_not_called()


def test_heartbeats_draw_nothing() -> None:
    clock = Clock()
    c, view = _timing(clock)
    appended = view.latency.append.call_count
    c.on_events([Heartbeat(1), Heartbeat(2)])
    assert view.latency.append.call_count == appended
    assert c.samples == 1
