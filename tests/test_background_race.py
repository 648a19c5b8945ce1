"""A window closed while its Background job ends (app/host/background.py): the worker used to
emit on the Background's own signal, racing the GUI thread deleting it with its window, a
segfault on either thread (this test failed 7 runs of 7 before the fix, each a crash within
its first 300 windows).
The worker now hands its result over through app/host/gui_relay.py, never touching the
window's objects. A stress test: the race is timing, so a clean run is evidence, and the
run before the fix shows it is evidence of something."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytest.importorskip("PySide6")

RACE = r"""
import faulthandler, sys, threading
faulthandler.enable()
from PySide6.QtWidgets import QApplication, QWidget
from app.host.background import Background

app = QApplication([])
delivered = []
for i in range(300):
    window = QWidget()
    go = threading.Event()
    jobs = [Background("x", window) for _ in range(16)]
    for job in jobs:
        job.submit(lambda: go.wait(5) and 1, delivered.append, delivered.append)
    del job, jobs
    go.set()  # sixteen workers end at once ...
    del window  # ... as the window and its Backgrounds are deleted
    app.processEvents()
kept = QWidget()  # and one that stays: its result still arrives
job = Background("kept", kept)
job.submit(lambda: 7, delivered.append, delivered.append)
while 7 not in delivered:
    app.processEvents()
print("ok", len(delivered))
"""


def test_a_window_deleted_as_its_jobs_end_never_crashes() -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", RACE],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("ok"), proc.stdout
