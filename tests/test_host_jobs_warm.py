"""The engine host's jobs start warm (issue 53: the window's first graph waited 17-93 s on a
busy machine, most of it a fresh interpreter importing onnx): forked from a fork server that
imported the heavy modules once (engine/run/job_start.py). A forked job still gets the
host's environment and folder of the moment, a crash in it ends that job only, and it dies
with its host, even one killed outright."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import psutil
import pytest

from engine.run import job_start
from engine.run.child_job import describe_exit

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the fork server is Linux's")
WAIT_S = 120.0


def probe_job(marker: str) -> Generator[Any, None, dict[str, Any]]:
    """What the job's process had when it started: onnx imported or not, the host's
    environment and folder."""
    return {
        "onnx": "onnx" in sys.modules,
        "env": os.environ.get("OPSCOPE_WARM_PROBE"),
        "cwd": os.getcwd(),
        "marker": marker,
    }
    yield  # a generator, as every job


def crash_job() -> Generator[Any, None, None]:
    os.abort()
    yield


def _run(job: Any, args: tuple[Any, ...]) -> tuple[str, Any, int | None]:
    """`job(*args)` started as the engine host starts its jobs (host_jobs.HostJob)."""
    job_start.warm()
    ctx = job_start.context()
    parent, child = ctx.Pipe(duplex=False)
    target, targs = job_start.start_args(child, job, args)
    proc = ctx.Process(target=target, args=targs)
    proc.start()
    child.close()
    kind, payload = "crashed", None
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if parent.poll(0.2):
            try:
                kind, payload = parent.recv()
            except EOFError:
                break
            if kind != "events":
                break
        elif not proc.is_alive():
            break
    proc.join(WAIT_S)
    parent.close()
    return kind, payload, proc.exitcode


def test_a_job_starts_with_onnx_imported_and_the_hosts_environment_and_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_start.warm()  # the server started first: what the host sets later still reaches the job
    monkeypatch.setenv("OPSCOPE_WARM_PROBE", "set after the server started")
    monkeypatch.chdir(tmp_path)
    kind, got, code = _run(probe_job, ("m",))
    assert (kind, code) == ("done", 0), got
    assert got["onnx"], "the job's process imported onnx itself: it did not start warm"
    assert got["env"] == "set after the server started"
    assert Path(got["cwd"]).resolve() == tmp_path.resolve()


def test_a_crash_in_a_forked_job_ends_that_job_only() -> None:
    kind, _payload, code = _run(crash_job, ())
    assert kind == "crashed" and describe_exit(code, "the job") == "the job crashed (SIGABRT)"
    kind, got, code = _run(probe_job, ("after the crash",))  # the server still serves
    assert (kind, code) == ("done", 0) and got["marker"] == "after the crash"


def silent_job() -> Generator[Any, None, None]:
    """A job that says nothing for an hour (a long native call: no event to fail on)."""
    time.sleep(3600)
    yield


def test_a_forked_job_dies_with_its_host_killed_outright() -> None:
    """A forked job is the fork server's child and holds the server open: a host killed
    outright must still end it, even one that sends nothing meanwhile (a job that sends
    finds the pipe closed at its next event)."""
    script = textwrap.dedent(
        """
        import time
        from engine.run import job_start
        from tests.test_host_jobs_warm import silent_job
        ctx = job_start.context()
        parent, child = ctx.Pipe(duplex=False)
        target, args = job_start.start_args(child, silent_job, ())
        proc = ctx.Process(target=target, args=args)
        proc.start()
        child.close()
        print(proc.pid, flush=True)
        time.sleep(3600)
        """
    )
    root = Path(__file__).resolve().parents[1]
    host = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            cwd=root, env={**os.environ, "PYTHONPATH": str(root)})  # fmt: skip
    try:
        assert host.stdout is not None
        job = psutil.Process(int(host.stdout.readline()))
        assert job.ppid() != host.pid  # forked from the server, not the host's own child
        time.sleep(1.0)
        assert job.is_running()
    finally:
        host.kill()
        host.wait()
        if host.stdout is not None:
            host.stdout.close()
    try:
        job.wait(WAIT_S)  # it ends (cancelled, as a SIGTERM ends a job)
    except psutil.TimeoutExpired:
        job.kill()
        raise AssertionError("the job outlived its host") from None


def test_the_host_starts_the_fork_server_once_its_first_latency_point_is_out() -> None:
    """Not before (it would take CPU from the first point), and then without a job asked."""
    from engine.events import LatencyBatch
    from engine.run import host_commands as cmds
    from tests.conftest import DEMO_CNN
    from tests.test_host import Host

    def servers(pid: int) -> list[psutil.Process]:
        return [p for p in psutil.Process(pid).children()
                if "multiprocessing.forkserver" in " ".join(p.cmdline())]  # fmt: skip

    host = Host()
    try:
        host.wait_for(lambda e: True)  # the host is up (its first heartbeat or telemetry)
        assert not servers(host.proc.pid)
        host.send(cmds.Load(str(DEMO_CNN)))
        host.wait_for(lambda e: isinstance(e, LatencyBatch) and e.latencies_ns.size > 0)
        deadline = time.monotonic() + WAIT_S
        while not servers(host.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert servers(host.proc.pid), "no fork server after the first latency point"
    finally:
        host.close()
