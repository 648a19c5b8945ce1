"""`opscope gui FILE.opscope`: a teammate's session opens in its read-only window alone: no
empty workbench beside it, no engine host, no autosave file; closing it ends the app; its
exports still run (beside the window, in a process of their own)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from tests.conftest import ROOT
from tests.session_material import record_demo_profile

# The app's own process (its event loop ends with the app, so not the suite's): opened as
# `opscope gui FILE` opens it; a second in, what shows and runs is noted and the session
# window closed as the user closes it; the app must end with it (not at the 30 s guard).
DRIVE = """
import json, multiprocessing, os, sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMainWindow
from app.entry import main

folder, seen = sys.argv[2], {}

def shown():
    return [w for w in QApplication.topLevelWidgets()
            if isinstance(w, QMainWindow) and w.isVisible()]

def look_then_close():
    seen["windows"] = [w.windowTitle() for w in shown()]
    seen["children"] = [p.name for p in multiprocessing.active_children()]
    seen["autosaves"] = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
    for w in shown():
        if "read-only" in w.windowTitle():
            w.close()

def too_late():
    seen["still open"] = [w.windowTitle() for w in shown()]
    for w in shown():
        w.close()
    QApplication.instance().quit()

app = QApplication(sys.argv[:1])
QTimer.singleShot(1500, look_then_close)
QTimer.singleShot(30000, too_late)
seen["rc"] = main(["gui", sys.argv[1]])
seen["autosaves at the end"] = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
print(json.dumps(seen))
"""


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("teammate") / "teammate.opscope"
    record_demo_profile(path)
    return path


def _opscope_gui(code: str, *args: str | Path, autosave: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OPSCOPE_SESSION_DIR": str(autosave), "QT_QPA_PLATFORM": "offscreen"}
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_session_file_opens_its_window_alone_and_closing_it_ends_the_app(
    shared: Path, tmp_path: Path
) -> None:
    autosave = tmp_path / "autosave"
    proc = _opscope_gui(DRIVE, shared, autosave, autosave=autosave)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["windows"] == [f"Session — {shared.name} (read-only)"]
    assert seen["children"] == []  # no engine host
    assert seen["autosaves"] == [] and seen["autosaves at the end"] == []  # nothing recorded
    assert "still open" not in seen, seen.get("still open")  # closing it ended the app
    assert seen["rc"] == 0


def test_a_session_file_that_cannot_be_opened_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.opscope"
    bad.write_bytes(b"not a database at all" * 100)
    autosave = tmp_path / "autosave"
    code = "import sys; from app.entry import main; sys.exit(main(sys.argv[1:]))"
    proc = _opscope_gui(code, "gui", bad, "--quit-after", "0.1", autosave=autosave)
    assert proc.returncode == 2
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "bad.opscope" in err[0] and "Traceback" not in proc.stderr
    assert not (autosave.exists() and os.listdir(autosave))


def test_the_lone_session_window_exports_without_an_engine(
    qtbot: QtBot, shared: Path, tmp_path: Path
) -> None:
    from app.sessions.viewer import SessionViewer

    viewer = SessionViewer(shared)
    qtbot.addWidget(viewer.window)
    try:
        out = tmp_path / "report.html"
        viewer.window.exports.start("report", str(shared), str(out))
        qtbot.waitUntil(lambda: not viewer.window.exports.busy, timeout=120_000)
        assert viewer.window.exports.saved == str(out), viewer.window.exports.text.text()
        assert out.is_file() and "<html" in out.read_text()[:2000].lower()
        assert viewer.client.pid is None  # no engine host was started for it
    finally:
        viewer.shutdown()
