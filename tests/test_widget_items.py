"""No window leaves Python wrappers of its layouts' items behind.

PySide wraps each QWidgetItem of a filled layout that is added to a layout already set on a
widget, and keeps the wrappers alive. Qt deletes the items with their window; the wrappers
stay in PySide's address map, and a later object that Qt allocates at the same address came
back as the stale wrapper: `'QWidgetItem' object has no attribute 'addAction'` from a
plot's menu, in a later test or a later window (CI, 2026-12). Every layout is therefore set
on its widget once it is filled."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

pytest.importorskip("PySide6")
from pytestqt.qtbot import QtBot


def _item_wrappers() -> int:
    return sum(1 for o in gc.get_objects() if type(o).__name__ == "QWidgetItem")


def test_the_windows_leave_no_layout_item_wrappers(qtbot: QtBot, tmp_path: Path) -> None:
    from app.sessions.session_window import SessionWindow
    from app.shell.workbench import Workbench

    before = _item_wrappers()
    wb = Workbench(session_path=str(tmp_path / "items.opscope"), usable=["cpu"])
    qtbot.addWidget(wb.window)
    assert _item_wrappers() == before
    window = SessionWindow(str(tmp_path / "items.opscope"), wb.jobs)
    qtbot.addWidget(window)
    assert _item_wrappers() == before
    window.close()
    wb.shutdown()
