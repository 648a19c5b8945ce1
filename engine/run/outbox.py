"""The engine host's outgoing side: events from any of its threads collected and sent to
the window as one list every ~50 ms (tens of messages a second, not one per inference), and
a heartbeat sent at once from a thread of its own (engine/run/heartbeat.py)."""

from __future__ import annotations

import dataclasses
import threading
import time

from engine.events import Event, Heartbeat, RunStarted
from engine.hostinfo import host_name
from engine.run.wire import Channel

SEND_INTERVAL_S = 0.05


class Outbox:
    """Collects events from any thread and sends them as one list every ~50 ms; a
    heartbeat goes out at once, from its own thread (one sender at a time on the pipe:
    a multiprocessing Connection writes a long message in parts)."""

    def __init__(self, conn: Channel) -> None:
        self._conn = conn
        self._items: list[Event] = []
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._last = 0.0
        self._facts_sent = False

    def put(self, ev: Event) -> None:
        if isinstance(ev, RunStarted) and ev.host is None:  # runs name their machine: the
            ev = dataclasses.replace(ev, host=host_name())  # window may be on another one
            if not self._facts_sent:  # and its facts, once: CPU, GPU, OS, versions
                from engine.session.env import host_facts

                self._facts_sent = True
                ev = dataclasses.replace(ev, machine=host_facts())
        with self._lock:
            self._items.append(ev)

    def flush(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < SEND_INTERVAL_S:
            return
        with self._lock:
            items, self._items = self._items, []
        self._last = now
        if items:
            with self._send_lock:
                self._conn.send(items)

    def beat(self, beat: Heartbeat) -> None:
        """Send a heartbeat now, alone: the main loop may be inside a long native call."""
        with self._send_lock:
            self._conn.send([beat])
