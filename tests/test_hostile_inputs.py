"""Inputs from the #16 probe that took a command down: an absurd thread count (thousands of
threads exhaust the process limit), a run id past SQLite's integers, a FIFO named like a
session (opening it blocked forever), a symlink loop. Each is one line and exit 2; too
many threads for the CPUs is a warning."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from engine.config import MAX_THREADS, RunConfig
from engine.errors import ConfigError
from tests.conftest import DEMO_CNN
from tests.test_cli import opscope


def _one_line(proc: object, said: str) -> None:
    rc, err = proc.returncode, proc.stderr  # type: ignore[attr-defined]
    assert rc == 2 and said in err and len(err.strip().splitlines()) == 1, err


def test_thread_counts_that_cannot_help(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="more than 1,024"):
        RunConfig(threads=MAX_THREADS + 1)
    _one_line(opscope("bench", DEMO_CNN, "--threads", "100000", "--duration", "0.1"),
              "threads 100,000 is more than 1,024")  # fmt: skip
    _one_line(opscope("tune", DEMO_CNN, "--space", "threads=1,5000"), "more than 1,024")
    crowded = (os.cpu_count() or 1) + 1
    proc = opscope("bench", DEMO_CNN, "--threads", str(crowded), "--duration", "0.2",
                   "--no-live", check=True)  # fmt: skip
    assert f"{crowded} threads on {crowded - 1} logical CPUs" in proc.stderr + proc.stdout


def test_a_run_id_past_sqlites_integers(tmp_path: Path) -> None:
    session = tmp_path / "s.opscope"
    opscope("bench", DEMO_CNN, "--duration", "0.2", "--no-live", "--session", session,
            check=True)  # fmt: skip
    huge = f"{session}:99999999999999999999"
    _one_line(opscope("session", "show", huge), "no run 99999999999999999999")
    _one_line(opscope("compare", f"{session}:1", huge), "no run 99999999999999999999")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_or_a_symlink_loop_is_not_a_session(tmp_path: Path) -> None:
    fifo = tmp_path / "x.opscope"
    os.mkfifo(fifo)
    for args in (("session", "show", fifo), ("report", fifo), ("export", fifo, "--trace",
                 tmp_path / "t.json"), ("compare", fifo, fifo)):  # fmt: skip
        _one_line(opscope(*args), "not a regular file")
    loop = tmp_path / "loop1"
    os.symlink(tmp_path / "loop2", loop)
    os.symlink(loop, tmp_path / "loop2")
    proc = opscope("report", loop)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and sys.platform != "win32"
