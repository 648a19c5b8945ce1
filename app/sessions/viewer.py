"""`opscope gui FILE.opscope`: a teammate's session opened by itself, read-only, in its own
window, with no engine host and no recording of its own (no autosave file): closing the
window ends the app. Its jobs (an export, a run's graph) run beside the window, each in a
process of its own, as a window connected to a remote host runs its exports
(app/host/remote_link.py)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject

from app.host.engine_client import EngineClient
from app.host.job_runner import JobRunner
from app.sessions.session_window import SessionWindow
from engine.api import HostJobs, commands


class BesideWindow(EngineClient):
    """The engine client's job side without an engine host: RunJob and CancelJob run on a
    `HostJobs` of the window's own (each job in a child process, its updates back as this
    client's `events`); there is no model to load, so no host process ever starts."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent=parent)
        self._jobs = HostJobs(self._put)
        self._open = True

    def _put(self, ev: Any) -> None:  # on a job's reader thread: queued to the GUI thread
        with contextlib.suppress(RuntimeError):  # the window has gone: nobody to tell
            self._tell(self.events, [ev])

    def start(self) -> None:  # nothing to start: jobs start their own processes
        return None

    @property
    def alive(self) -> bool:
        return self._open

    @property
    def pid(self) -> int | None:
        return None

    def send(self, cmd: Any) -> None:
        if isinstance(cmd, commands.RunJob) and self._open:
            self._jobs.start(cmd.job_id, cmd.request)
        elif isinstance(cmd, commands.CancelJob):
            self._jobs.cancel(cmd.job_id)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Every job cancelled (each keeps what it wrote), given `timeout` to end."""
        self._open = False
        self._jobs.stop_all(wait_s=timeout)


class SessionViewer:
    """The session at `path` in a `SessionWindow` (its `closed` says when it has closed);
    raises OpScopeError (one line) for a file that cannot be opened. The client and the
    runner go with the window."""

    def __init__(self, path: str | Path) -> None:
        self.client = BesideWindow()
        self.jobs = JobRunner(self.client)
        self.window = SessionWindow(path, self.jobs)
        self.client.setParent(self.window)
        self.jobs.setParent(self.window)

    def shutdown(self) -> None:
        self.client.shutdown()
