"""The engine host's heartbeat (engine/run/heartbeat.py): it reaches the window while the
host's main loop is inside a long call that releases the GIL (as ONNX Runtime's run does),
while Python code hogs the GIL, and stops when the process is stopped; the pipe never has
two writers at once; the recorder keeps nothing of it."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.events import Heartbeat, Notice, Telemetry
from engine.run import host_commands as cmds
from engine.run.heartbeat import HeartbeatThread
from engine.run.outbox import Outbox
from engine.run.wire import PipeConnection
from tests.conftest import DEMO_CNN

LONG_CALL_S = 4.0


class OneWriter:
    """A channel that records what it was sent and fails if two threads write at once."""

    def __init__(self) -> None:
        self.sent: list[list[Any]] = []
        self._writing = False

    def send(self, obj: Any) -> None:
        assert not self._writing, "two writers on the pipe at once"
        self._writing = True
        time.sleep(0.002)  # a long message is written in parts
        self.sent.append(obj)
        self._writing = False


def _beats(sent: list[list[Any]]) -> int:
    return sum(isinstance(ev, Heartbeat) for batch in sent for ev in batch)


def test_beats_go_out_while_the_main_thread_is_blocked_or_hogs_the_gil() -> None:
    conn = OneWriter()
    out = Outbox(conn)  # type: ignore[arg-type]
    beat = HeartbeatThread(out.beat, interval_s=0.05)
    beat.start()
    try:
        time.sleep(0.5)  # a C call that releases the GIL, as InferenceSession.run does
        during_sleep = _beats(conn.sent)
        end = time.monotonic() + 0.5
        n = 0
        while time.monotonic() < end:  # pure Python: the GIL changes hands every 5 ms
            n += 1
            if n % 1000 == 0:
                out.put(Notice("info", "x"))
                out.flush(force=True)  # the main loop sends too, never at the same time
        during_loop = _beats(conn.sent) - during_sleep
    finally:
        beat.stop()
    assert during_sleep >= 5 and during_loop >= 5
    stopped = _beats(conn.sent)
    time.sleep(0.2)
    assert _beats(conn.sent) == stopped  # stop() ends it


def test_a_closed_pipe_ends_the_heartbeat_quietly() -> None:
    def closed(_: Heartbeat) -> None:
        raise BrokenPipeError

    beat = HeartbeatThread(closed, interval_s=0.01)
    beat.start()
    beat._thread.join(2)
    assert not beat._thread.is_alive() and beat.sent == 0


def _host_with_a_long_profile(conn: Any) -> None:
    """host_main whose profiling pass is one long call that releases the GIL, said before
    and after (the spawned child imports this module and runs this)."""
    import engine.run.host as host
    import engine.run.host_profiler as profiler

    def long_profile(run: Any) -> Iterator[Any]:
        yield Notice("info", "long call begins")  # sent at once: the pass goes step by step
        time.sleep(LONG_CALL_S)  # no flush, no telemetry sent: only the heartbeat thread
        yield Notice("info", "long call ends")

    profiler.profile_events = long_profile
    host.host_main(conn, 0.1)


class Host:
    def __init__(self, target: Any) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.conn = PipeConnection(parent)
        self.proc = ctx.Process(target=target, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.events: list[tuple[float, Any]] = []  # (arrival, event)

    def receive(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if self.conn.poll(0.05):
                now = time.monotonic()
                self.events.extend((now, ev) for ev in self.conn.recv())

    def wait_for(self, pred: Any, timeout: float = 90) -> int:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for i, (_, ev) in enumerate(self.events):
                if pred(ev):
                    return i
            self.receive(0.2)
        raise AssertionError(f"timed out; last: {[type(e).__name__ for _, e in self.events[-8:]]}")

    def close(self) -> None:
        if self.proc.is_alive():
            if hasattr(signal, "SIGCONT"):  # a stopped host must run to shut down
                os.kill(self.proc.pid or 0, signal.SIGCONT)
            with contextlib.suppress(OSError):
                self.conn.send(cmds.Shutdown())
            self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()


def _said(text: str) -> Any:
    return lambda ev: isinstance(ev, Notice) and ev.message == text


def test_the_host_beats_through_a_long_call_in_its_main_loop() -> None:
    """A profiling pass of batch 8 under load: the main loop sends nothing for seconds
    (not even the telemetry its sampler collects meanwhile), the heartbeat goes on."""
    host = Host(_host_with_a_long_profile)
    try:
        host.receive(0.5)
        host.conn.send(cmds.Load(str(DEMO_CNN)))
        begins = host.wait_for(_said("long call begins"))
        ends = host.wait_for(_said("long call ends"), timeout=LONG_CALL_S + 30)
        (t_begins, _), (t_ends, _) = host.events[begins], host.events[ends]
        inside = [(t, ev) for t, ev in host.events if t_begins < t < t_ends]  # later batches
        beats = [t for t, ev in inside if isinstance(ev, Heartbeat)]
        assert len(beats) >= 2  # one a second (a loaded machine may delay one)
        assert not any(isinstance(ev, Telemetry) for _, ev in inside)  # the main loop's sends
    finally:
        host.close()


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="POSIX signals")
def test_a_stopped_host_stops_beating() -> None:
    from engine.run.host import host_main

    host = Host(host_main)
    try:
        host.wait_for(lambda ev: isinstance(ev, Heartbeat))
        os.kill(host.proc.pid or 0, signal.SIGSTOP)
        host.receive(0.3)  # what was on its way
        mark = len(host.events)
        host.receive(2.5)
        assert not host.events[mark:]  # nothing at all: the window's alarm will fire
        os.kill(host.proc.pid or 0, signal.SIGCONT)
        deadline = time.monotonic() + 30  # beating again (a busy machine delays the first)
        while time.monotonic() < deadline:
            host.receive(0.2)
            if any(isinstance(ev, Heartbeat) for _, ev in host.events[mark:]):
                break
        assert any(isinstance(ev, Heartbeat) for _, ev in host.events[mark:])
    finally:
        host.close()


def test_the_recorder_keeps_no_heartbeat(tmp_path: Path) -> None:
    from engine.session.recorder import Recorder
    from engine.session.store import SessionStore

    store = SessionStore.create_or_open(tmp_path / "s.opscope")
    rec = Recorder(store, kind="live")
    rec.feed_many([Heartbeat(k) for k in range(100)])
    rec.flush()
    tables = [
        r[0] for r in store.db.conn.execute("select name from sqlite_master where type='table'")
    ]
    for table in tables:
        if table not in ("meta", "schema_version", "sqlite_sequence"):
            (n,) = store.db.conn.execute(f"select count(*) from {table}").fetchone()
            assert n == 0, table
    store.close()
