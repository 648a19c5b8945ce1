"""SIGTERM and SIGHUP end a command as Ctrl+C does: the run is marked cancelled, the samples
measured so far are kept, and nothing but one line reaches stderr."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.session.reader import SessionReader
from tests.conftest import DEMO_CNN

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_a_bench_as_ctrl_c_does(sig: signal.Signals, tmp_path: Path) -> None:
    session = tmp_path / "s.opscope"
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.entry", "bench", str(DEMO_CNN), "--duration", "60",
         "--threads", "1", "--no-live", "--session", str(session)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # until samples are being recorded
        time.sleep(0.5)
        if session.is_file():
            try:
                with SessionReader.open(session) as reader:
                    runs = reader.runs()
                    if runs and reader.latency(runs[0].id)[1].size > 100:
                        break
            except Exception:  # the file mid-creation
                continue
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "opscope: interrupted"
    assert "Traceback" not in stderr
    with SessionReader.open(session) as reader:
        (run,) = reader.runs()
        assert run.status == "cancelled" and reader.latency(run.id)[1].size > 100


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_closes_the_app_as_its_window_does(sig: signal.Signals, tmp_path: Path) -> None:
    """`kill` or a closed terminal: the live run ends recorded (status ok, its statistics),
    the file checkpointed (no -wal left), the engine host gone, no traceback (before: the
    app died at once and the run stayed `running` in the WAL)."""
    import os

    session = tmp_path / "app.opscope"
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.entry", "--session", str(session)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # until the live run has committed samples
        time.sleep(0.5)
        try:
            with SessionReader.open(session) as reader:
                runs = reader.runs()
                if runs and reader.latency(runs[0].id)[1].size > 100:
                    break
        except Exception:  # not created yet, or mid-write
            continue
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Traceback" not in stderr, stderr
    assert not Path(f"{session}-wal").exists()
    with SessionReader.open(session) as reader:
        (run,) = reader.runs()
        assert run.status == "ok" and run.latency is not None and run.samples > 100


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_an_overloaded_load_with_its_summary(
    sig: signal.Signals, tmp_path: Path
) -> None:
    """Overloaded, thousands queued: the loop stops, its instance is joined, the summary
    prints with the backlog unserved, the run is cancelled with its requests (before: the
    joins timed out after 10 s and the interpreter exited around a thread inside ONNX
    Runtime: rc -6, "terminate called without an active exception", no summary)."""
    import sqlite3

    session = tmp_path / "load.opscope"
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.entry", "load", str(DEMO_CNN), "--traffic", "poisson:20000",
         "--duration", "60", "--threads", "1", "--session", str(session)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # until requests (and a backlog) are recorded
        time.sleep(0.5)
        try:
            with contextlib.closing(sqlite3.connect(f"file:{session}?mode=ro", uri=True)) as c:
                if c.execute("SELECT count(*) FROM requests WHERE outcome = 3").fetchone()[0]:
                    break
        except sqlite3.Error:  # not created yet
            continue
    sent = time.monotonic()
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    took = time.monotonic() - sent
    assert proc.returncode == 130, stderr
    assert "terminate called" not in stderr and "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == "opscope: interrupted"
    assert took < 8  # generous: the old loop's joins alone waited 10 s
    (line,) = [ln for ln in stdout.splitlines() if ln.startswith("requests ")]
    assert "unserved (queued when it stopped)" in line
    assert not Path(f"{session}-wal").exists()
    with SessionReader.open(session) as reader:
        (run,) = reader.runs()
        assert run.status == "cancelled" and sig.name.replace("SIGINT", "Ctrl-C") in run.error
        serving = reader.serving(run.id)
        assert serving is not None and serving.summary is not None
        rec = serving.records
        assert (rec.outcome == 3).sum() == serving.summary["requests"]["unserved"] > 0
        assert (rec.outcome == 0).sum() == serving.summary["requests"]["completed"] > 0


def test_the_engine_host_exits_quietly_when_its_window_dies() -> None:
    """The window killed (kill -9): the host's pipe closes; it says so in one line and
    exits 0 (before: a BrokenPipeError traceback)."""
    script = (
        "import multiprocessing as mp, time\n"
        "from engine.run.host import host_main\n"
        "from engine.run.wire import PipeConnection\n"
        "if __name__ == '__main__':\n"
        "    ctx = mp.get_context('spawn')\n"
        "    raw, child = ctx.Pipe()\n"
        "    parent = PipeConnection(raw)\n"
        "    proc = ctx.Process(target=host_main, args=(child, 0.02))\n"
        "    proc.start(); child.close()\n"
        "    parent.recv()  # the host is up and sending\n"
        "    parent.close()\n"
        "    proc.join(30)\n"
        "    print('exit', proc.exitcode)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=90
    )
    assert done.stdout.strip() == "exit 0", done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip() == "opscope engine host: the window went away; stopping"


def test_a_full_disk_during_load_ends_it_in_one_line(tmp_path: Path) -> None:
    """The file cannot grow (a file-size limit, as a full disk refuses writes): one line
    says what was kept, the loop's threads are joined (before: rc 134, "terminate called
    without an active exception"), and the run never reads `running`."""
    import resource

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death
        resource.setrlimit(resource.RLIMIT_FSIZE, (1_500_000, 1_500_000))

    session = tmp_path / "full.opscope"
    done = subprocess.run(
        [sys.executable, "-m", "app.entry", "load", str(DEMO_CNN), "--traffic", "poisson:300",
         "--duration", "60", "--threads", "1", "--session", str(session)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, preexec_fn=limit,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "terminate called" not in done.stderr and "Traceback" not in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"opscope: error: {session}: cannot write to it") and "kept" in last
    with SessionReader.open(session) as reader:
        (run,) = reader.runs()
        assert run.status in ("error", "interrupted") and run.samples > 0
