"""The engine host told to end while it measures the machine's peaks (a minute or more on
a busy machine): the measurement stops part-way and the live run ends at once, with its
summary. Before, the host finished the measurement first; the window's wait for it (20 s)
ran out and killed it, and the run stayed "cancelled: recording closed before the run
ended" (tests/test_cli_signals.py, SIGTERM/SIGHUP under load)."""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.events import PeaksMeasured, Progress, RunEnded, TimingDone
from engine.run import host_commands as cmds
from engine.run.host import host_main
from engine.run.wire import PipeConnection
from tests.conftest import DEMO_CNN


def _peaks_begun(ev: Any) -> bool:
    return isinstance(ev, Progress) and ev.stage == "peaks" and ev.done == 0


def _shutdown_when(model: Path, begun: Callable[[Any], bool]) -> tuple[list[Any], int | None]:
    """A real host on `model`: Shutdown sent once an event `begun` says so; what the host
    sent after it, until it exited, and its exit code."""
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    conn = PipeConnection(parent)
    proc = ctx.Process(target=host_main, args=(child, 0.1), daemon=True)
    proc.start()
    child.close()
    events: list[Any] = []
    try:
        conn.send(cmds.Load(str(model)))
        deadline = time.monotonic() + 120
        while not any(begun(e) for e in events):
            assert time.monotonic() < deadline, [type(e).__name__ for e in events[-10:]]
            if conn.poll(0.1):
                events.extend(conn.recv())
        asked = len(events)
        conn.send(cmds.Shutdown())
        while time.monotonic() < deadline:  # everything the host sends until it exits
            try:
                if conn.poll(0.1):
                    events.extend(conn.recv())
            except EOFError:
                break
        proc.join(30)
    finally:
        if proc.is_alive():
            proc.kill()
    return events[asked:], proc.exitcode


def test_a_shutdown_during_the_peaks_measurement_ends_the_run_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))  # none cached: the first pass
    from engine.machine.peaks import peaks_path  # measures them (the app's first run too)

    after, code = _shutdown_when(DEMO_CNN, _peaks_begun)
    assert code == 0
    ends = [e for e in after if isinstance(e, RunEnded)]
    assert [e.status for e in ends] == ["ok"]
    assert any(isinstance(e, TimingDone) and e.latency.count > 0 for e in after)
    # stopped part-way: nothing measured was sent or cached (measured another time)
    assert not any(isinstance(e, PeaksMeasured) for e in after)
    assert not peaks_path().exists()
    (done,) = [e for e in after if isinstance(e, Progress) and e.stage == "peaks"]
    assert done.done == 1 and "stopped" in done.message


def _pass_begun(ev: Any) -> bool:
    return isinstance(ev, Progress) and ev.stage == "profile" and ev.done == 0


def test_a_shutdown_during_a_profiling_pass_drops_the_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass is not waited for: a big model's pass on a busy machine outlasted the
    window's wait for its host (20 s), which then killed it, its run unended. Before, the
    pass ended first (its OpProfile came after the Shutdown)."""
    from engine.events import OpProfile
    from tests.conftest import DEMO_TRANSFORMER as DEMO

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))
    after, code = _shutdown_when(DEMO, _pass_begun)
    assert code == 0
    assert [e.status for e in after if isinstance(e, RunEnded)] == ["ok"]
    assert not any(isinstance(e, OpProfile) for e in after)
