"""A signal that lands while `opscope` is still importing, before a command installs its
own handling (found by bench/probe_fuzz.py on a busy machine, where imports take seconds):
one line and exit 130, as an interrupted command ends. It died by SIGTERM (-15) and SIGHUP
(-1), and Ctrl-C printed a KeyboardInterrupt traceback from inside an import (or NumPy's
"bad install" message, exit 1)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.conftest import DEMO_CNN

# The real console-script entry, with the signal sent the moment the CLI's module starts
# importing: after `run()` began, before the command's handlers exist (no timing involved).
CHILD = """
import os, signal, sys
SIG, MODEL = getattr(signal, sys.argv[1]), sys.argv[2]
class SignalOnImport:
    def find_spec(self, name, path, target=None):
        if name == "engine.cli.main":
            os.kill(os.getpid(), SIG)
        return None
sys.meta_path.insert(0, SignalOnImport())
sys.argv = ["opscope", "info", MODEL]
from app.entry import run
run()
"""


def _default_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_during_the_imports_is_one_line_and_exit_130(name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, name, str(DEMO_CNN)],
        capture_output=True,
        text=True,
        timeout=120,
        # as a terminal starts it (a runner in the background ignores SIGINT; one under
        # nohup, SIGHUP)
        preexec_fn=_default_signals,
    )
    assert done.returncode == 130, (done.returncode, done.stderr[-2000:])
    assert done.stderr == "opscope: interrupted\n"
    assert done.stdout == ""


def test_an_ignored_signal_stays_ignored() -> None:
    """nohup's SIGHUP: ignored before, ignored after; the command runs to its end."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "SIGHUP", str(DEMO_CNN)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "demo_cnn.onnx" in done.stdout
