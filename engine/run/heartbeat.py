"""The engine host's heartbeat: a tiny event sent from a thread of its own every second,
whatever the host's main loop is doing, so that the window can tell a host busy in a long
native call (a profiling pass, a calibration: ONNX Runtime releases the GIL while it runs)
from one that is stopped or frozen whole (SIGSTOP, a native call that holds the GIL).

Heartbeats are liveness only: the window's recorder ignores them, so a session never holds
a row for one."""

from __future__ import annotations

import threading
from collections.abc import Callable

from engine.events import Heartbeat

HEARTBEAT_S = 1.0  # between beats; the window calls a host hung after tens of them missed


class HeartbeatThread:
    """Calls `send(Heartbeat(n))` at once and then every `interval_s` from a daemon thread
    until stopped; a send that fails (the window has gone) ends it quietly."""

    def __init__(self, send: Callable[[Heartbeat], None], interval_s: float = HEARTBEAT_S) -> None:
        self._send = send
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="opscope-heartbeat", daemon=True)
        self.sent = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)

    def _loop(self) -> None:
        while True:
            try:
                self._send(Heartbeat(self.sent + 1))
            except (OSError, EOFError, ValueError):  # the pipe closed: nobody listens
                return
            self.sent += 1
            if self._stop.wait(self._interval):
                return
