"""A tune's trials, its re-check and the memory probe start warm where it pays:
forked from the fork server that imported numpy, onnx and their modules once
(engine/run/job_start.py), not each a fresh interpreter (~1 CPU-s of imports each:
bench/results/job_start_cost.md). A killed warm trial is still a failed trial with its one
line, and the tune goes on."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psutil
import pytest

from engine.config import RunConfig
from engine.events import drive
from engine.model.workload import Workload
from engine.run import job_start
from engine.tune.search import Goal
from engine.tune.trial import run_trial
from engine.tune.tune_job import TuneRequest, tune_job
from tests.conftest import DEMO_CNN

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the fork server is Linux's")


class Jobs:
    """The job processes started while it watches: forked from this process's fork
    server (its children) or spawned (this process's own, `spawn_main` in their command)."""

    def __init__(self) -> None:
        self.forked: list[int] = []
        self.spawned: list[int] = []
        self.servers: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            for child in me.children():
                try:
                    cmd = " ".join(child.cmdline())
                    if "multiprocessing.forkserver" in cmd:
                        self.servers.add(child.pid)
                        for job in child.children():
                            if job.pid not in self.forked:
                                self.forked.append(job.pid)
                    elif "spawn_main" in cmd and child.pid not in self.spawned:
                        self.spawned.append(child.pid)
                except psutil.Error:
                    pass
            time.sleep(0.02)

    def __enter__(self) -> Jobs:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@contextmanager
def no_server_warmed_here(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As a fresh CLI process: this process has started no fork server (another test in
    this worker may have); the server itself, if any, is left running."""
    monkeypatch.setattr(job_start, "_warmed", False, raising=False)
    yield


def test_a_tunes_trials_and_its_recheck_are_forked_from_the_fork_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A tune (`opscope tune`, the Tune dock's job) starts the server at its first trial;
    every trial and the re-check after them are forked from it, none spawned."""
    req = TuneRequest(
        Workload(str(DEMO_CNN), RunConfig(threads=1)),
        {"batch": [1, 2]},
        Goal("p50", 0.0),
        duration_s=0.2,
        recheck=True,
    )
    with no_server_warmed_here(monkeypatch), Jobs() as jobs:
        result = drive(tune_job(req))
    assert [t.status for t in result.trials] == ["ok", "ok"], [t.error for t in result.trials]
    assert result.pick is not None, "the re-check did not run"
    assert not jobs.spawned, f"spawned jobs: {jobs.spawned}"
    assert len(jobs.forked) >= 3, f"2 trials and a re-check forked, saw {jobs.forked}"


def test_a_memory_probe_is_forked_where_a_server_runs_and_spawned_where_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The probe is one job: forked from a server this process runs already (a tune's, the
    window's), spawned rather than starting a server for it (`opscope memory`)."""
    from engine.run.memory_job import MemoryRequest, memory_job

    req = MemoryRequest(Workload(str(DEMO_CNN), RunConfig(threads=1)), runs=2)
    assert job_start.warm()
    with Jobs() as jobs:
        report = drive(memory_job(req))
    assert report["measured"]["held_bytes"] > 0 and report["provider_used"]
    assert len(jobs.forked) == 1 and not jobs.spawned, (jobs.forked, jobs.spawned)
    with no_server_warmed_here(monkeypatch), Jobs() as jobs:
        report = drive(memory_job(req))
    assert report["measured"]["held_bytes"] > 0
    assert len(jobs.spawned) == 1 and not jobs.forked, (jobs.forked, jobs.spawned)


def _kill_first(jobs: Jobs, after_s: float) -> Callable[[], None]:
    def kill() -> None:
        deadline = time.monotonic() + 120
        while not jobs.forked and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(after_s)  # into its run
        os.kill(jobs.forked[0], signal.SIGKILL)  # as the OOM killer does

    return kill


def test_a_warm_trial_killed_mid_run_is_a_failed_trial_with_its_line() -> None:
    work = Workload(str(DEMO_CNN), RunConfig(threads=1))
    with Jobs() as jobs:
        threading.Thread(target=_kill_first(jobs, 0.3), daemon=True).start()
        trial = run_trial(1, work, 30.0, None)
        after = run_trial(2, work, 0.2, None)  # the next trial runs, from the same server
    assert trial.status == "failed"
    assert trial.error == "the trial's engine was killed (SIGKILL)"
    assert trial.wall_s < 30.0
    assert after.status == "ok" and after.samples > 0
    assert len(jobs.forked) == 2 and not jobs.spawned
