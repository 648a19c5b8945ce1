"""Exports from the window: written off the GUI thread, with a busy strip that ends in the
saved path and an Open button, or in the error."""

from __future__ import annotations

import threading
from pathlib import Path

from pytestqt.qtbot import QtBot

from app.exports import ExportNotice
from tests.session_material import record_demo_profile


def test_report_is_written_off_the_gui_thread_and_says_where(qtbot: QtBot, tmp_path: Path) -> None:
    session = tmp_path / "demo.opscope"
    record_demo_profile(session)
    notice = ExportNotice()
    qtbot.addWidget(notice)
    out = tmp_path / "report.html"
    notice.start("report", str(session), str(out))
    assert notice.isVisible() and notice.busy
    assert notice.text.text().startswith(f"Writing report {out}")
    assert notice.bar.isVisible() and not notice.open_button.isVisible()
    qtbot.waitUntil(lambda: not notice.busy, timeout=60_000)
    assert notice.worker is not None and notice.worker != threading.main_thread().name
    assert notice.worker.startswith("opscope-export-")
    assert notice.text.text().startswith(f"Report saved: {out}")
    assert notice.saved == str(out) and out.stat().st_size > 1000
    assert notice.open_button.isVisible() and not notice.bar.isVisible()


def test_a_failed_export_says_why_in_one_line(qtbot: QtBot, tmp_path: Path) -> None:
    notice = ExportNotice()
    qtbot.addWidget(notice)
    missing = tmp_path / "missing.opscope"
    notice.start("trace", str(missing), str(tmp_path / "t.json"))
    qtbot.waitUntil(lambda: not notice.busy, timeout=30_000)
    text = notice.text.text()
    assert text.startswith("Cannot export trace: ") and "missing.opscope" in text
    assert "\n" not in text and notice.saved is None and not notice.open_button.isVisible()
