"""A dock's toggle (its shortcut, its View entry) as a user means it: a dock open behind
another tab comes to the front; only a dock in front is closed; a closed one opens in front
(issue 53: Ctrl+Shift+F closed the Traffic dock behind the Operators tab). No engine is
started."""

from __future__ import annotations

import functools

import pytest
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget
from pytestqt.qtbot import QtBot

from app.shell.workbench import Workbench


@pytest.fixture
def wb(first_start: Workbench) -> Workbench:
    return first_start  # the first layout, not another test's saved one


def in_front(dock: QDockWidget) -> bool:
    return dock.isVisible() and not dock.visibleRegion().isEmpty()


def behind(dock: QDockWidget) -> bool:
    return not in_front(dock)


def shortcut_action(wb: Workbench, keys: str) -> QAction:
    want = QKeySequence(keys)
    return next(a for a in wb.window.findChildren(QAction) if a.shortcut() == want)


def test_a_docks_shortcut_raises_it_from_behind_a_tab(wb: Workbench, qtbot: QtBot) -> None:
    w = wb.window
    w.resize(1600, 1000)
    w.show()
    qtbot.waitUntil(w.isVisible)
    traffic, ops = w.dock("Traffic"), w.dock("Operators")
    assert traffic in w.tabifiedDockWidgets(ops)
    ops.raise_()
    qtbot.waitUntil(lambda: in_front(ops) and not in_front(traffic))
    toggle = shortcut_action(wb, "Ctrl+Shift+F")
    assert toggle is traffic.toggleViewAction()
    toggle.trigger()  # behind the Operators tab: raised, not closed
    qtbot.waitUntil(lambda: in_front(traffic))
    assert not traffic.isHidden() and toggle.isChecked()
    toggle.trigger()  # in front: closed
    assert traffic.isHidden() and not toggle.isChecked()
    toggle.trigger()  # closed: open again, in front
    qtbot.waitUntil(lambda: in_front(traffic))
    assert toggle.isChecked()


def test_every_docks_toggle_raises_a_background_tab(wb: Workbench, qtbot: QtBot) -> None:
    """Each dock tabbed behind another, through its View entry: raised, never closed."""
    w = wb.window
    w.resize(1600, 1000)
    w.show()
    qtbot.waitUntil(w.isVisible)
    for dock in w.findChildren(QDockWidget):
        others = [d for d in w.tabifiedDockWidgets(dock) if not d.isHidden()]
        if dock.isHidden() or not others:
            continue
        others[0].raise_()
        qtbot.waitUntil(functools.partial(behind, dock))
        dock.toggleViewAction().trigger()
        qtbot.waitUntil(functools.partial(in_front, dock))
        assert not dock.isHidden(), dock.windowTitle()
