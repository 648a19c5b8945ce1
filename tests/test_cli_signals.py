"""SIGTERM and SIGHUP end a command as Ctrl+C does: the run is marked cancelled, the samples
measured so far are kept, and nothing but one line reaches stderr."""

from __future__ import annotations

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
