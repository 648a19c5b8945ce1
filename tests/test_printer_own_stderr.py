"""A step that goes quiet inside a session's creation still says it is running: ONNX
Runtime's log is captured by pointing the process's fd 2 at a temporary file while the
session is made (engine/backends/ort/inference_session.py `CapturedStderr`), and the
printer's "still running" lines went there too, unseen (stop 62's probe fuzz: `opscope
memory` on a 100,000-node chain said "[inputs] making 64 evaluation samples" and then
nothing for minutes). The printer writes to its own copy of stderr, taken when it is made."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import time
import engine.cli.printer as printer_mod
from engine.backends.ort.inference_session import CapturedStderr
from engine.events import Progress

printer_mod.STILL_S = 0.2
printer = printer_mod.LivePrinter(live=False)
printer.feed(Progress("session", 0, None, "creating the inference session"))
with CapturedStderr() as captured:
    time.sleep(1.5)
printer.close()
print("captured:", repr(captured.text))
"""


def test_still_running_reaches_stderr_while_fd2_is_captured() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "[session] creating the inference session: still running" in done.stderr
    assert "still running" not in done.stdout  # nothing of ours in ORT's captured log


def test_the_printer_keeps_what_it_was_given() -> None:
    """A stream handed in (a test's StringIO, a log file) is used as it is."""
    import io

    from engine.cli.printer import LivePrinter

    out = io.StringIO()
    printer = LivePrinter(out, live=False)
    assert printer.stream is out
    printer.close()
    assert not out.closed
