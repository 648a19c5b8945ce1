"""`run_isolated` started warm (engine/run/isolated.py, engine/run/job_start.py): a job
forked from this process's fork server keeps every guarantee a spawned one has. A crash or
an out-of-memory ends that job only, in one line; a timeout, a Ctrl+C or a SIGTERM here
stops it as Ctrl+C stops a command; it dies with its parent, even one killed outright;
the memory and CPU limits its parent has when it starts apply to it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from engine.errors import ConfigError
from engine.events import Notice
from engine.run import job_start
from engine.run.child_job import describe_exit
from engine.run.isolated import run_isolated

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the fork server is Linux's")
ROOT = Path(__file__).resolve().parents[1]
WAIT_S = 120.0


def server_pids() -> set[int]:
    """This process's fork servers (one, once started)."""
    return {
        p.pid
        for p in psutil.Process().children()
        if "multiprocessing.forkserver" in " ".join(p.cmdline())
    }


def pid_job(mark: str) -> Iterator[Notice]:
    """Its process and that process's parent, and whether onnx came imported."""
    Path(mark).write_text(f"{os.getpid()} {os.getppid()} {int('onnx' in sys.modules)}")
    return
    yield


def marking_job(mark: str) -> Iterator[Notice]:
    """Says it is up (its pid), then waits; stopped (SIGTERM, as Ctrl+C), leaves a mark."""
    Path(f"{mark}.up").write_text(str(os.getpid()))
    try:
        time.sleep(60)
    except KeyboardInterrupt:
        Path(mark).write_text("term")
        raise
    yield Notice("info", "not reached")


def failing_job(why: str) -> Iterator[Notice]:
    yield Notice("info", "starting")
    raise ConfigError(why)


def aborting_job() -> Iterator[Notice]:
    yield Notice("info", "starting")
    os.abort()  # a native library's crash


def allocating_job(megabytes: int) -> Iterator[Notice]:
    import numpy as np

    yield Notice("info", "allocating")
    block = np.ones(megabytes * 2**20, dtype=np.uint8)
    return int(block.sum())


def _wait_for(path: Path) -> str:
    """The mark's text once written: write_text makes the file before it fills it, so one
    seen empty is read again (it read '' once in a fresh clone's run)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            text = path.read_text()
        except FileNotFoundError:
            text = ""
        if text:
            return text
        time.sleep(0.05)
    return path.read_text()


def test_a_warm_job_is_forked_from_the_server_and_a_spawned_one_is_not(tmp_path: Path) -> None:
    mark = tmp_path / "warm"
    assert run_isolated(pid_job, (str(mark),), WAIT_S, start="warm").status == "done"
    pid, ppid, onnx = map(int, mark.read_text().split())
    assert ppid in server_pids() and ppid != os.getpid(), "not forked from the fork server"
    assert onnx == 1, "the job imported onnx itself: it did not start warm"
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie"
    # "if_warm" (a one-off's): forked here, where the server runs already
    assert run_isolated(pid_job, (str(mark),), WAIT_S, start="if_warm").status == "done"
    assert int(mark.read_text().split()[1]) in server_pids()
    assert run_isolated(pid_job, (str(mark),), WAIT_S, start="spawn").status == "done"
    assert int(mark.read_text().split()[1]) == os.getpid()


def test_a_warm_job_ends_in_one_line_or_as_a_crash_and_the_server_serves_on(
    tmp_path: Path,
) -> None:
    ended = run_isolated(failing_job, ("no such model",), WAIT_S, start="warm")
    assert (ended.status, ended.error) == ("failed", "no such model")
    ended = run_isolated(aborting_job, (), WAIT_S, start="warm")
    assert ended.status == "crashed"
    assert describe_exit(ended.exitcode, "the trial's engine") == (
        "the trial's engine crashed (SIGABRT)"
    )
    mark = tmp_path / "mark"  # the timeout: stopped as Ctrl+C stops it, then waited for
    ended = run_isolated(marking_job, (str(mark),), 3.0, grace_s=30, start="warm")
    assert ended.status == "timeout" and mark.read_text() == "term"
    ended = run_isolated(pid_job, (str(tmp_path / "after"),), WAIT_S, start="warm")
    assert ended.status == "done", "the server died with its crashed job"


def test_a_warm_job_killed_from_outside_is_a_crash_in_one_line(tmp_path: Path) -> None:
    """The OOM killer's SIGKILL, say: the job's end is told as a spawned one's is."""
    mark = tmp_path / "mark"

    def kill_when_up() -> None:
        os.kill(int(_wait_for(Path(f"{mark}.up"))), signal.SIGKILL)

    threading.Thread(target=kill_when_up, daemon=True).start()
    ended = run_isolated(marking_job, (str(mark),), WAIT_S, start="warm")
    assert ended.status == "crashed"
    assert describe_exit(ended.exitcode, "the trial's engine") == (
        "the trial's engine was killed (SIGKILL)"
    )


def test_ctrl_c_here_stops_a_warm_job_with_sigterm_and_waits_for_it(tmp_path: Path) -> None:
    mark = tmp_path / "mark"

    def interrupt_when_up() -> None:
        _wait_for(Path(f"{mark}.up"))
        os.kill(os.getpid(), signal.SIGINT)

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt_when_up, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            run_isolated(marking_job, (str(mark),), WAIT_S, start="warm")
    finally:
        signal.signal(signal.SIGINT, before)
    assert mark.read_text() == "term"


PARENT = textwrap.dedent(
    """
    import signal, sys
    from engine.run.isolated import run_isolated
    from tests.test_child_job_warm import marking_job
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # as the CLI takes it
    run_isolated(marking_job, (sys.argv[1],), 60, start="warm")
    """
)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_warm_job_dies_with_its_parent(tmp_path: Path, sig: signal.Signals) -> None:
    """Killed outright or told to stop, the parent leaves no job behind: the job is the
    fork server's child, and hears of its parent's end (SIGTERM) all the same."""
    mark = tmp_path / "mark"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(mark)], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    try:
        job = psutil.Process(int(_wait_for(Path(f"{mark}.up"))))
        assert job.ppid() != parent.pid, "spawned, not forked from the parent's server"
        parent.send_signal(sig)
        parent.wait(WAIT_S)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
    assert _wait_for(mark) == "term"


LIMITED = textwrap.dedent(
    """
    import os, resource, sys, tempfile
    import psutil
    from engine.run.isolated import run_isolated
    from tests.test_child_job_warm import allocating_job, pid_job, server_pids
    mark = os.path.join(tempfile.mkdtemp(), "mark")
    run_isolated(pid_job, (mark,), 120, start="warm")  # the server up, its imports done
    (server,) = server_pids()
    vms = max(psutil.Process(server).memory_info().vms, psutil.Process().memory_info().vms)
    limit = vms + 2**30  # set after the server started (which has none)
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))
    ended = run_isolated(allocating_job, (2 * 2**10,), 120, start="warm")
    print(ended.status, ended.error)
    ended = run_isolated(allocating_job, (64,), 120, start="warm")  # within it: done
    print(ended.status, ended.error)
    """
)


def test_a_memory_limit_set_after_the_server_started_still_limits_a_warm_job() -> None:
    """A `ulimit -v` (RLIMIT_AS) is the parent's when the job starts, as a spawned child
    inherits it: the job's allocation past it fails in one line, the parent goes on."""
    out = subprocess.run(
        [sys.executable, "-c", LIMITED],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=WAIT_S,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert first.startswith("failed internal error: MemoryError"), out.stdout
    assert second == "done ", out.stdout


def test_the_frozen_app_and_a_spawn_setting_keep_spawning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark = tmp_path / "mark"
    monkeypatch.setenv(job_start.START_ENV, "spawn")
    assert run_isolated(pid_job, (str(mark),), WAIT_S, start="warm").status == "done"
    assert int(mark.read_text().split()[1]) == os.getpid()
    monkeypatch.delenv(job_start.START_ENV)
    assert job_start.isolated_context("warm").get_start_method() == "forkserver"
    monkeypatch.setattr(sys, "frozen", True, raising=False)  # a start not run: the bundle's
    assert job_start.isolated_context("warm").get_start_method() == "spawn"
