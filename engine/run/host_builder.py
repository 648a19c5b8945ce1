"""The engine host's builds: the next config prepared in a worker thread while the running
one goes on (its timing waits meanwhile: engine/run/live_job.py); a newer request
supersedes an older one, which stops at its next progress point."""

from __future__ import annotations

import threading
import traceback

from engine.backends.base import PrepareRequest
from engine.errors import OpScopeError
from engine.events import CommandFailed, Notice
from engine.run.live import Staged, stage
from engine.run.outbox import Outbox


class Builder:
    """Prepares one config in a worker thread; a newer request supersedes (generation)."""

    def __init__(self, out: Outbox) -> None:
        self._out = out
        self.generation = 0
        self.result: tuple[int, Staged] | None = None
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.label = ""  # what the newest build prepares

    @property
    def building(self) -> bool:
        """A build is still working (a superseded one too, until its next progress point):
        the running config's timing waits, or the build's CPU time would be in its
        samples (an INT8 search beside a live MiniLM made FP32 read 4-15 ms instead of
        2.7)."""
        self._threads = [t for t in self._threads if t.is_alive()]
        return bool(self._threads)

    @property
    def has_result(self) -> bool:
        """A finished build waits to be taken (a failed or cancelled one leaves none)."""
        return self.result is not None

    def submit(self, req: PrepareRequest, label: str, command: str) -> None:
        self._cancel.set()  # the older build stops at its next progress point
        self._cancel = cancel = threading.Event()
        self.generation += 1
        gen = self.generation
        self.label = label
        thread = threading.Thread(
            target=self._work,
            args=(req, label, command, gen, cancel),
            name=f"opscope-build-{gen}",
            daemon=True,
        )
        self._threads.append(thread)
        thread.start()

    def cancel(self) -> None:
        self._cancel.set()
        self.generation += 1

    def take(self) -> Staged | None:
        with self._lock:
            result, self.result = self.result, None
        if result is None or result[0] != self.generation:
            return None  # stale: a newer request superseded it
        return result[1]

    def _work(
        self, req: PrepareRequest, label: str, command: str, gen: int, cancel: threading.Event
    ) -> None:
        events = stage(req, label)
        try:
            while True:
                if cancel.is_set():
                    events.close()
                    self._out.put(Notice("info", f"cancelled: {label}"))
                    return
                self._out.put(next(events))
        except StopIteration as stop:
            with self._lock:
                self.result = (gen, stop.value)
        except OpScopeError as exc:
            self._out.put(CommandFailed(command, str(exc)))
        except Exception as exc:  # a bug, but the old config keeps running
            self._out.put(CommandFailed(command, f"internal error: {exc!r}"))
            traceback.print_exc()
