"""The engine host on another machine, held like a local host process: it connects over
the user's ssh in the background (the window never waits on the network), and sends each
command in order, the files it names first (once, by content hash, with progress). A
command whose files cannot be sent fails in one line as a command does on a local host."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

from engine.api import (
    Channel,
    CommandFailed,
    FileSender,
    HostJobs,
    JobUpdate,
    Notice,
    OpScopeError,
    Progress,
    SshHost,
    Target,
    commands,
    finished_jobs,
    window_side,
)

_STOP = object()


class RemoteLink:
    """`send` queues; a worker connects, then sends in order. Shaped as the process the
    client holds (is_alive, kill, join, exitcode, pid) plus `why` for its end."""

    def __init__(
        self,
        target: Target,
        deliver: Callable[[list[Any]], object],
        connected: Callable[[Channel], None],
        failed: Callable[[str], None],
    ) -> None:
        self.ssh = SshHost(target)
        self._deliver, self._connected, self._failed = deliver, connected, failed
        self._queue: queue.Queue[Any] = queue.Queue()
        self._files = FileSender(target, self._progress)
        self._conn: Channel | None = None
        self._ended = threading.Event()  # the worker is done (failed, stopped or killed)
        self._failure: str | None = None
        self._killed = False
        self._here = HostJobs(self._deliver_one)  # exports, imports: the window's files
        self._here_ids: set[int] = set()
        self._worker = threading.Thread(target=self._work, daemon=True, name="opscope-ssh-send")

    def start(self) -> None:
        self._worker.start()

    # as the client's process ------------------------------------------------------------
    def send(self, cmd: Any) -> None:
        if window_side(cmd):
            self._here_ids.add(cmd.job_id)
            self._here.start(cmd.job_id, cmd.request)
        elif isinstance(cmd, commands.CancelJob) and cmd.job_id in self._here_ids:
            self._here.cancel(cmd.job_id)
        else:
            if isinstance(cmd, commands.Shutdown):  # the window closes: as the host does
                self._here.stop_all()
            self._queue.put(cmd)

    def is_alive(self) -> bool:
        if self._failure is not None:
            return False
        return not self._ended.is_set() if self._conn is None else self.ssh.is_alive()

    def cancel_upload(self) -> None:
        """Stop sending the files of the command being sent (it fails, in one line)."""
        self._files.cancelled.set()

    def kill(self) -> None:
        self._killed = True
        self._here.stop_all(wait_s=0)
        self._files.cancelled.set()
        self._queue.put(_STOP)
        self.ssh.kill()

    def join(self, timeout: float | None = None) -> None:
        self._worker.join(timeout)
        self.ssh.join(timeout)

    @property
    def exitcode(self) -> int | None:
        return self.ssh.exitcode

    @property
    def pid(self) -> int | None:
        return self.ssh.pid

    @property
    def failed(self) -> bool:
        """The connection could not be made (the banner says why)."""
        return self._failure is not None

    def why(self) -> str:
        return self._failure or self.ssh.why()

    def _deliver_one(self, ev: Any) -> None:
        self._deliver([ev])

    def settle(self, batch: list[Any]) -> list[Any]:
        """`batch` once the sessions of the jobs ending in it are brought back from the host
        and merged into ours (before the window hears they ended); a line if one was not."""
        said: list[Any] = []
        for job_id in finished_jobs(batch):
            if job_id in self._files.sessions:
                why = self._files.bring_back(job_id)
                if why is not None:
                    said.append(Notice("warning", why))
        return [*said, *batch] if said else batch

    # the worker --------------------------------------------------------------------------
    def _progress(self, name: str, done: int, total: int) -> None:
        mb = f"{done / 1e6:.1f} of {total / 1e6:.1f} MB"
        self._deliver(
            [Progress("upload", done, total, f"sending {name} to {self.ssh.target}: {mb}")]
        )

    def _work(self) -> None:
        try:
            conn = self.ssh.start()
        except OpScopeError as exc:
            self._failure = str(exc)
            self._ended.set()
            self._failed(self._failure)
            return
        self._conn = conn
        self._files.results = self.ssh.facts.get("results")
        self._connected(conn)
        try:
            while (cmd := self._queue.get()) is not _STOP:
                if not self._killed:  # a Cancel meant for an earlier command
                    self._files.cancelled.clear()
                try:
                    out = self._files.command(cmd)
                except KeyboardInterrupt:  # killed, or Cancel, while a file was sent
                    if self._killed:
                        break
                    self._files.cancelled.clear()
                    self._deliver([_failed(cmd, "cancelled while its files were sent")])
                    continue
                except OpScopeError as exc:
                    self._deliver([_failed(cmd, str(exc))])
                    continue
                conn.send(out)
                if isinstance(cmd, commands.Shutdown):
                    self.ssh.close_input()
                    break
        except OSError:  # the link dropped: the reader says so
            pass
        finally:
            self._ended.set()


def _failed(cmd: Any, message: str) -> Any:
    if isinstance(cmd, commands.RunJob):
        return JobUpdate(cmd.job_id, "failed", message)
    return CommandFailed(type(cmd).__name__.lower(), message)
