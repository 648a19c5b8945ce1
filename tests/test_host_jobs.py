"""Jobs in the engine host (engine/run/host_jobs.py) and the window's runner of them
(app/host/job_runner.py): a job's events and result come back as JobUpdates; a bad request
fails in one line; Cancel stops it as Ctrl+C would (a sweep keeps its points done, marked
partial); a job process killed outright is a failure in words; the runner supersedes,
cancels and ends its jobs with a dead host, tested against a spec'd double of the client."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import psutil
import pytest

from engine.config import RunConfig
from engine.events import JobUpdate, Progress
from engine.model.workload import Workload
from engine.run import host_commands as cmds
from engine.run.host import host_main
from engine.run.jobs import JOBS, job_for, job_name
from engine.run.wire import PipeConnection
from engine.session import open_session_file
from engine.tune.sweep import SweepPoint
from engine.tune.sweep_job import SweepRequest, SweepStored
from tests.conftest import DEMO_TRANSFORMER

WAIT_S = 120.0


@pytest.fixture
def host() -> Iterator[tuple[PipeConnection, Any]]:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    conn = PipeConnection(parent)
    proc = ctx.Process(target=host_main, args=(child, 1.0, 0), name="opscope-engine")
    proc.start()
    child.close()
    try:
        yield conn, proc
    finally:
        conn.send(cmds.Shutdown())
        proc.join(15)
        if proc.is_alive():
            proc.kill()


def _updates(conn: PipeConnection, job_id: int, until: Any) -> list[JobUpdate]:
    """The job's updates until `until(update)` says stop (or its end)."""
    seen: list[JobUpdate] = []
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if not conn.poll(0.2):
            continue
        for ev in conn.recv():
            if isinstance(ev, JobUpdate) and ev.job_id == job_id:
                seen.append(ev)
                if until(ev) or ev.kind != "events":
                    return seen
    raise AssertionError(f"job {job_id}: no end within {WAIT_S:g} s ({seen[-1:]})")


def _items(updates: list[JobUpdate]) -> list[Any]:
    return [item for u in updates if u.kind == "events" for item in u.payload]


def _sweep(tmp_path: Path, values: list[str], dim: str = "sequence") -> SweepRequest:
    return SweepRequest.of(
        Workload(str(DEMO_TRANSFORMER), RunConfig(threads=1)), dim, values,
        str(tmp_path / "jobs.opscope"), duration_s=0.3, profile_runs=2,
    )  # fmt: skip


def test_every_registered_job_resolves() -> None:
    import importlib

    for key in JOBS:
        module, name = key.rsplit(".", 1)
        request_type = getattr(importlib.import_module(module), name)
        assert isinstance(request_type.job_name, str) and request_type.job_name
        assert callable(job_for(request_type.__new__(request_type)))


def test_a_bad_request_fails_in_one_line(host: tuple[PipeConnection, Any], tmp_path: Path) -> None:
    conn, _ = host
    conn.send(cmds.RunJob(1, _sweep(tmp_path, ["16", "32"], dim="no_such_dim")))
    *_, end = _updates(conn, 1, lambda u: False)
    assert end.kind == "failed" and "\n" not in end.payload
    assert "no_such_dim" in end.payload and "no such dim" in end.payload


def test_cancel_keeps_the_points_done_and_a_kill_is_told(
    host: tuple[PipeConnection, Any], tmp_path: Path
) -> None:
    conn, proc = host
    conn.send(cmds.RunJob(1, _sweep(tmp_path, ["16", "24", "32", "48", "64", "96", "128"])))
    first = _updates(conn, 1, lambda u: any(isinstance(i, SweepPoint) for i in _items([u])))
    assert first[-1].kind == "events"
    conn.send(cmds.CancelJob(1))
    rest = _updates(conn, 1, lambda u: False)
    assert rest[-1].kind == "cancelled", rest[-1]
    (stored,) = [i for i in _items(first + rest) if isinstance(i, SweepStored)]
    assert stored.partial and 1 <= stored.points < 7 and stored.of == 7
    with open_session_file(tmp_path / "jobs.opscope") as reader:
        (sweep,) = reader.sweeps()
        assert sweep.status == "partial" and len(sweep.values) == stored.points

    conn.send(cmds.RunJob(2, _sweep(tmp_path, ["16", "32", "64", "128"])))
    _updates(conn, 2, lambda u: True)  # it runs
    # the job's process: spawned by the host, or forked from its jobs' fork server (a
    # child of the host's whose own child the job is): the one process with none of its own
    (child,) = [
        p for p in psutil.Process(proc.pid).children(recursive=True)
        if "resource_tracker" not in " ".join(p.cmdline()) and not p.children()
    ]  # fmt: skip
    os.kill(child.pid, signal.SIGKILL)
    *_, end = _updates(conn, 2, lambda u: False)
    assert end.kind == "failed" and end.payload == "the sweep process was killed (SIGKILL)"


# -- the window's runner, against a spec'd double of the engine client ----------------------


def _runner() -> tuple[Any, MagicMock]:
    pytest.importorskip("PySide6")
    from app.host.engine_client import EngineClient
    from app.host.job_runner import JobRunner

    client = MagicMock(spec=EngineClient)
    client.alive = True
    return JobRunner(client), client


def _calls(seen: list[tuple[str, Any]]) -> dict[str, Any]:
    return {
        "on_done": lambda r: seen.append(("done", r)),
        "on_failed": lambda why: seen.append(("failed", why)),
        "on_events": lambda batch: seen.append(("events", batch)),
        "on_cancelled": lambda: seen.append(("cancelled", None)),
    }


def test_the_runner_supersedes_and_drops_late_updates(tmp_path: Path) -> None:
    runner, client = _runner()
    seen: list[tuple[str, Any]] = []
    first = runner.start("sweep", _sweep(tmp_path, ["16"]), **_calls(seen))
    client.send.assert_called_with(cmds.RunJob(first, _sweep(tmp_path, ["16"])))
    second = runner.start("sweep", _sweep(tmp_path, ["32"]), **_calls(seen))
    assert second != first
    assert cmds.CancelJob(first) in [c.args[0] for c in client.send.call_args_list]
    runner._events([JobUpdate(first, "events", ["late"]), JobUpdate(first, "done", "old")])
    assert seen == []  # the older job's updates are dropped
    runner._events([JobUpdate(second, "events", ["p"]), JobUpdate(second, "done", "r")])
    assert seen == [("events", ["p"]), ("done", "r")] and not runner.busy("sweep")


def test_the_runner_cancels_and_a_dead_host_ends_its_jobs(tmp_path: Path) -> None:
    runner, client = _runner()
    seen: list[tuple[str, Any]] = []
    job = runner.start("sweep", _sweep(tmp_path, ["16"]), **_calls(seen))
    runner.cancel("sweep")
    assert client.send.call_args.args[0] == cmds.CancelJob(job) and runner.busy("sweep")
    runner._events([JobUpdate(job, "cancelled", "cancelled")])
    assert seen == [("cancelled", None)] and not runner.busy("sweep")

    seen.clear()
    runner.start("tune", _sweep(tmp_path, ["16"]), **_calls(seen))
    runner._host_died("recording failed: disk full")  # the host lives on: so does the job
    assert seen == [] and runner.busy("tune")
    client.alive = False
    runner._host_died("the engine host crashed (SIGSEGV)")
    assert seen == [("failed", "the engine host crashed (SIGSEGV); the sweep ended with it")]
    runner.start("tune", _sweep(tmp_path, ["16"]), **_calls(seen))  # no host: told at once
    assert seen[-1] == ("failed", "the engine host is not running")
    assert job_name(_sweep(tmp_path, ["16"])) == "sweep"


def slow_stopping_job(path: str) -> Iterator[Any]:
    """A job that takes half a second to store what it measured once interrupted."""
    try:
        while True:  # (events go back in batches as the job yields)
            yield Progress("job", 0, None, "running")
            time.sleep(0.02)
    except KeyboardInterrupt:
        time.sleep(0.5)  # storing
        Path(path).write_text("stored")
        raise


def test_a_second_sigterm_does_not_cut_the_stop_short(tmp_path: Path) -> None:
    """The host ending sends its jobs SIGTERM again (they die with it): the first stops
    the job; a later one must not interrupt it storing what it measured."""
    from engine.run.child_job import _isolated_main

    stored = tmp_path / "stored.txt"
    ctx = mp.get_context("spawn")
    conn, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_isolated_main, args=(child, slow_stopping_job, (str(stored),)))
    proc.start()
    child.close()
    assert conn.poll(60) and conn.recv()[0] == "events"  # running
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGTERM)
    time.sleep(0.2)  # inside its stopping
    os.kill(proc.pid, signal.SIGTERM)
    proc.join(10)
    messages = []
    with contextlib.suppress(EOFError):
        while conn.poll(0):
            messages.append(conn.recv()[0])
    assert stored.read_text() == "stored" and messages[-1] == "cancelled"
