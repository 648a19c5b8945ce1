"""Engine work that must not share the window's process (a real serving run whose threads
and timing the GUI would disturb, a calibration that measures): `ProcessJob.start(job,
*args)` runs `engine.run.child_job.child_main` in a spawned child and relays its events,
result or failure as Qt signals on the GUI thread; `cancel()` kills the child. One job at
a time; a late message from an older job is dropped (a generation counter)."""

from __future__ import annotations

import multiprocessing as mp
import threading
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.host.engine_client import describe_exit
from engine.api import Job, child_main


class ProcessJob(QObject):
    events = Signal(list)  # list[Event]
    done = Signal(object)  # the job's result
    failed = Signal(str)  # one line
    cancelled = Signal()
    _message = Signal(int, str, object)  # generation, kind, payload (from the reader)

    def __init__(self, name: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.generation = 0
        self._proc: BaseProcess | None = None
        self._cancelled = False
        self._message.connect(self._deliver)

    @property
    def busy(self) -> bool:
        return self._proc is not None

    def start(self, job: Job, *args: Any) -> None:
        self.kill()
        ctx = mp.get_context("spawn")  # never fork a process that has Qt threads
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(
            target=child_main, args=(child, job, args), name=f"opscope-{self.name}", daemon=True
        )
        proc.start()
        child.close()
        self.generation += 1
        self._proc, self._cancelled = proc, False
        threading.Thread(
            target=self._read,
            args=(parent, proc, self.generation),
            name=f"opscope-{self.name}-reader",
            daemon=True,
        ).start()

    def cancel(self) -> None:
        """Kill the child; `cancelled` follows once it has gone."""
        if self._proc is not None:
            self._cancelled = True
            self._proc.kill()

    def kill(self) -> None:
        """Kill any child silently (the window closes, or a new job replaces it)."""
        proc, self._proc = self._proc, None
        self.generation += 1
        if proc is not None and proc.is_alive():
            proc.kill()
            proc.join(2)

    def _read(self, conn: Connection, proc: BaseProcess, generation: int) -> None:
        ended = False
        while True:
            try:
                kind, payload = conn.recv()
            except (EOFError, OSError):
                break
            ended = kind in ("done", "failed")
            self._message.emit(generation, kind, payload)
        conn.close()
        proc.join(5)
        if not ended:
            self._message.emit(generation, "died", describe_exit(proc.exitcode))

    def _deliver(self, generation: int, kind: str, payload: object) -> None:
        if generation != self.generation:
            return  # an older job's, superseded
        if kind == "events":
            self.events.emit(payload)
            return
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.join(2)
        if kind == "done":
            self.done.emit(payload)
        elif kind == "failed":
            self.failed.emit(str(payload))
        elif self._cancelled:
            self.cancelled.emit()
        else:
            text = str(payload).replace("the engine host", f"the {self.name} process")
            self.failed.emit(text)
