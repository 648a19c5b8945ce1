"""A step that goes quiet still says it is running. A command announces each step of long
work as a Progress event, but a step that is one long native call (a model's first
inference, a Loop of 10^12 iterations; a session made of a million-node chain) sends
nothing more until it ends: the user saw one line and then silence, with no way to tell
a slow step from a stopped process. `StepWatch` runs a daemon thread that, while the last
thing said was a step and nothing came after it for `quiet_s`, calls `say` with the step
and how long it has run, again every `quiet_s` (ONNX Runtime releases the GIL in a run,
so the thread gets to speak). It holds its printer weakly: a printer dropped without
`stop()` ends the thread at its next tick."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable


class StepWatch:
    """`started(stage, text)` when a step is announced, `moved()` on anything else (the
    step gave way to results, notices or another event), `stop()` at the end."""

    def __init__(self, say: Callable[[str, str, float], None], quiet_s: float) -> None:
        self._say = weakref.WeakMethod(say)
        self._quiet_s = quiet_s
        self._lock = threading.Lock()
        self._step: tuple[str, str, float] | None = None  # stage, text, when announced
        self._last = 0.0  # when anything was last said or fed
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def started(self, stage: str, text: str) -> None:
        now = time.monotonic()
        with self._lock:
            self._step, self._last = (stage, text, now), now
        if self._thread is None and not self._stopped.is_set():
            self._thread = threading.Thread(
                target=self._watch, name="opscope-step-watch", daemon=True
            )
            self._thread.start()

    def moved(self) -> None:
        with self._lock:
            self._step, self._last = None, time.monotonic()

    def stop(self) -> None:
        self._stopped.set()

    def _watch(self) -> None:
        while not self._stopped.wait(min(1.0, self._quiet_s)):
            with self._lock:
                now = time.monotonic()
                if self._step is None or now - self._last < self._quiet_s:
                    continue
                stage, text, since = self._step
                self._last = now
            say = self._say()
            if say is None:  # the printer is gone
                return
            try:
                say(stage, text, now - since)
            except (OSError, ValueError):  # stderr closed or full: nothing more to say there
                return
            del say
