"""The engine host's job runner: each job the window asks for (engine/run/jobs.py) runs in a
child process of the host's own (engine/run/child_job.py: a crash there ends that job only,
and the child dies with the host), its events relayed to the window as `JobUpdate`s in the
host's event stream. Cancel is SIGTERM, which the job takes as Ctrl+C (it keeps what it
measured and says "cancelled"), then a kill if it has not ended within `STOP_GRACE_S`.

Written once for every job: progress and results as events, one line on failure, a crash
in words, cancel, and "a newer job for the same concern supersedes the older" (the window
sends the older's cancel first; here every job id is independent).

A job on the loaded model (a load run, a calibration) runs on a thread of the host instead,
`ThreadJob`: its events join the host's stream as the live loop's do (they are a run of the
session, drawn on the live plot), its end comes as the same JobUpdate, and cancel is its
model's `stop` (stop sending: what was sent is served and recorded).

The engine host's own jobs run beside them in the same table: the live loop
(engine/run/live_job.py) and the profiling passes (engine/run/host_profiler.py) are
`Stepped` jobs, each advanced by one small step per round of the host's loop (`step`), and
ended with the rest when the host ends (`stop_all`)."""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any, Protocol

from engine.errors import OpScopeError
from engine.events import Event, JobUpdate
from engine.run.child_job import STOP_GRACE_S, _sigint_ignored, describe_exit
from engine.run.job_start import context, start_args, warm
from engine.run.jobs import job_name, run_job
from engine.run.serving_jobs import LoadedModel


class HostJob:
    def __init__(self, job_id: int, request: object, put: Callable[[Event], None]) -> None:
        self.job_id, self.request, self._put = job_id, request, put
        self.name = job_name(request)
        self.cancelled = False
        # forked from the warm fork server (its modules imported), or a fresh interpreter:
        # no threads or locks inherited either way (engine/run/job_start.py)
        warm()  # the server started now if the host has not yet (a server refused: spawn)
        ctx = context()
        parent, child = ctx.Pipe(duplex=False)
        target, args = start_args(child, run_job, (request,))
        self.proc: BaseProcess = ctx.Process(target=target, args=args, name=f"opscope-{self.name}")
        with _sigint_ignored():  # a terminal's Ctrl+C goes to the window, which cancels
            self.proc.start()
        child.close()
        self.done = threading.Event()
        self._reader = threading.Thread(
            target=self._read, args=(parent,), name=f"opscope-job-{job_id}", daemon=True
        )
        self._reader.start()

    def abort(self) -> None:
        self.cancel()

    def cancel(self) -> None:
        """SIGTERM (the job ends as Ctrl+C ends a command), a kill after the grace time."""
        if self.done.is_set() or not self.proc.is_alive():
            return
        self.cancelled = True
        self.proc.terminate()
        threading.Thread(target=self._kill_late, name="opscope-job-kill", daemon=True).start()

    def _kill_late(self) -> None:
        if not self.done.wait(STOP_GRACE_S) and self.proc.is_alive():
            self.proc.kill()

    def _read(self, conn: Connection) -> None:
        ended = False
        while True:
            try:
                kind, payload = conn.recv()
            except (EOFError, OSError):
                break
            except Exception as exc:  # an event the window cannot be sent (a bug)
                self._put(JobUpdate(self.job_id, "failed", f"internal error: {exc!r}"))
                ended = True
                break
            if kind == "events":
                self._put(JobUpdate(self.job_id, "events", payload))
                continue
            ended = True
            self._put(JobUpdate(self.job_id, kind, payload))
        self.proc.join(STOP_GRACE_S)  # the pipe kept open meanwhile: a forked job takes
        if self.proc.is_alive():  # its close for its host's end (child_job.die_with_reader)
            self.proc.kill()
            self.proc.join()
        conn.close()
        if not ended:
            if self.cancelled:
                self._put(JobUpdate(self.job_id, "cancelled", "cancelled"))
            else:
                why = describe_exit(self.proc.exitcode, f"the {self.name} process")
                self._put(JobUpdate(self.job_id, "failed", why))
        self.done.set()


class ThreadJob:
    """A job on the loaded model, on a thread of the host; `done` once it has ended."""

    def __init__(
        self, job_id: int, request: object, model: LoadedModel, put: Callable[[Event], None]
    ) -> None:
        self.job_id, self.request, self.model, self._put = job_id, request, model, put
        self.name = job_name(request)
        self.done = threading.Event()
        threading.Thread(target=self._run, name=f"opscope-{self.name}", daemon=True).start()

    def cancel(self) -> None:
        self.model.stop()

    def abort(self) -> None:
        self.model.abort()

    def _run(self) -> None:
        gen = run_job(self.request, self.model)
        try:
            while True:
                try:
                    self._put(next(gen))
                except StopIteration as stop:
                    result = stop.value
                    break
            if self.model.stopping.is_set():
                self._put(JobUpdate(self.job_id, "cancelled", "cancelled"))
            else:
                self._put(JobUpdate(self.job_id, "done", result))
        except OpScopeError as exc:
            self._put(JobUpdate(self.job_id, "failed", str(exc)))
        except Exception as exc:  # a bug: one line for the window, the traceback on stderr
            traceback.print_exc()
            self._put(JobUpdate(self.job_id, "failed", f"internal error: {exc!r}"))
        finally:
            self.model.close()
            self.done.set()


class Stepped(Protocol):
    """A job of the host's main loop: one small step at a time, never blocking for long."""

    @property
    def busy(self) -> bool:
        """It has a step to take at once (the loop waits for no command meanwhile)."""
        ...

    def step(self) -> None: ...

    def end(self) -> None:
        """The host ends."""
        ...


class HostJobs:
    """The jobs running in this host: the window's, by id, and the host's own `stepped`
    ones (stepped in their order)."""

    def __init__(self, put: Callable[[Event], None], stepped: Sequence[Stepped] = ()) -> None:
        self._put = put
        self._jobs: dict[int, HostJob | ThreadJob] = {}
        self._stepped = list(stepped)

    @property
    def busy(self) -> bool:
        """One of the host's own jobs has a step to take at once."""
        return any(job.busy for job in self._stepped)

    def step(self) -> None:
        """One step of each of the host's own jobs (the others run on their own)."""
        for job in self._stepped:
            job.step()

    def start(self, job_id: int, request: Any, model: LoadedModel | None = None) -> None:
        """Run `request`'s job: in a child process, or on `model` on a thread here."""
        self._reap()
        try:
            if model is not None:
                self._jobs[job_id] = ThreadJob(job_id, request, model, self._put)
            else:
                self._jobs[job_id] = HostJob(job_id, request, self._put)
        except Exception as exc:  # a request that cannot be sent to a child (a bug)
            self._put(JobUpdate(job_id, "failed", f"could not start the job: {exc!r}"))

    def get(self, job_id: int) -> HostJob | ThreadJob | None:
        return self._jobs.get(job_id)

    def cancel(self, job_id: int) -> None:
        job = self._jobs.get(job_id)
        if job is not None:
            job.cancel()

    def stop_all(self, wait_s: float = STOP_GRACE_S) -> None:
        """The host ends: every job cancelled, given `wait_s` to keep what it measured;
        then the host's own ones ended."""
        for job in self._jobs.values():
            job.abort()
        for job in self._jobs.values():
            job.done.wait(wait_s)
        for stepped in self._stepped:
            stepped.end()

    @property
    def running(self) -> int:
        self._reap()
        return len(self._jobs)

    def _reap(self) -> None:
        for job_id in [i for i, j in self._jobs.items() if j.done.is_set()]:
            del self._jobs[job_id]
