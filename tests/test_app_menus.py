"""The window's menus and layout as a user meets them: every panel in View (also after it
was closed), Help's shortcut list read from the real actions, and a 1024x700 window that
fits. No engine is started."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMenu
from pytestqt.qtbot import QtBot

from app.shell.help_dialogs import GUIDE, guide_dialog, shortcut_rows, shortcuts_dialog
from app.shell.workbench import Workbench


@pytest.fixture
def wb(qtbot: QtBot, tmp_path: Path):  # type: ignore[no-untyped-def]
    bench = Workbench(session_path=str(tmp_path / "menus.opscope"), usable=["cpu"])
    qtbot.addWidget(bench.window)
    yield bench
    bench.shutdown()


def menu(wb: Workbench, title: str) -> QMenu:
    return next(m for m in wb.window.menuBar().findChildren(QMenu) if m.title() == title)


def test_every_dock_is_in_the_view_menu_and_comes_back_after_close(
    wb: Workbench, qtbot: QtBot
) -> None:
    w = wb.window
    w.show()
    view = menu(wb, "&View")
    docks = w.findChildren(QDockWidget)
    assert {d.objectName() for d in docks} >= {"operators", "roofline", "configuration"}
    for dock in docks:
        assert dock.toggleViewAction() in view.actions(), dock.objectName()
    w.roofline_dock.close()
    assert not w.roofline_dock.isVisible()
    toggle = next(a for a in view.actions() if a.text() == "Roofline")
    assert not toggle.isChecked()
    toggle.trigger()
    assert w.roofline_dock.isVisible()


def test_shortcut_list_is_read_from_the_actions(wb: Workbench) -> None:
    rows = shortcut_rows(wb.window)
    export = QKeySequence("Ctrl+Shift+E").toString(QKeySequence.SequenceFormat.NativeText)
    assert ("File", "Export Report", export) in rows
    assert any(r[1] == "Follow Latest" and r[2] == "F" for r in rows)
    assert any(r[1] == "Keyboard Shortcuts" for r in rows)
    extra = QAction("Do a New Thing", wb.window)  # any action the window gains is listed
    extra.setShortcut(QKeySequence("Ctrl+Alt+N"))
    wb.window.addAction(extra)
    assert any(r[1] == "Do a New Thing" for r in shortcut_rows(wb.window))
    from PySide6.QtWidgets import QTableWidget

    dialog = shortcuts_dialog(wb.window)
    table = dialog.findChild(QTableWidget)
    assert table is not None and table.rowCount() == len(shortcut_rows(wb.window))
    assert "profiling" in GUIDE and guide_dialog(wb.window).windowTitle().startswith("How")
    helpm = menu(wb, "&Help")
    assert [a.text() for a in helpm.actions() if a.text()][:2] == [
        "&How to Read This Window",
        "&Keyboard Shortcuts",
    ]


def test_the_window_fits_1024_by_700(wb: Workbench, qtbot: QtBot) -> None:
    w = wb.window
    w.telemetry.append(
        1.0,
        {
            "cpu_percent": 100.0,
            "process_cpu_percent": 138.5,
            "rss_bytes": 1.06e8,
            "cpu_freq_mhz": 2596.0,
            "mem_percent": 41.0,
        },
    )
    w.set_status(
        "demo_cnn.onnx",
        "CPU on AMD EPYC",
        "p50 1.161 ms · p99 69.722 ms over the last 200 inferences (1.52 s) · 132.0 samples/s",
        "session: /root/.local/share/opscope/sessions/session-20261130-212126.opscope",
    )
    w.resize(1024, 700)
    w.show()
    qtbot.waitUntil(lambda: w.isVisible())
    assert w.width() == 1024 and w.height() == 700
    labels = [w.status_model, w.status_provider, w.status_rate, w.status_session]
    rects = [lab.geometry() for lab in labels if lab.isVisible()]
    for a, b in itertools.pairwise(rects):
        assert a.right() < b.left(), (a, b)  # nothing in the status bar overlaps
    assert w.status_session.text() == "session: session-20261130-212126.opscope"
    assert w.status_session.toolTip().endswith("/sessions/session-20261130-212126.opscope")
    for series in w.telemetry._series.values():  # every tile shows its whole number
        assert series.label.geometry().right() <= series.cell.contentsRect().right()
        assert series.cell.geometry().right() <= w.telemetry.width()


def test_the_demo_llm_keeps_the_window_at_1024_by_700(wb: Workbench, qtbot: QtBot) -> None:
    """Opening the demo LLM grew the window to 1117x826 by itself (the LLM Serving form's
    width, the Generation panel's height); forced back, its dock drew over the Runs dock
    and the tab bar was hidden. Every dock now scrolls inside its share instead."""
    from app.shell.demos import demo_models
    from tests.conftest import ROOT

    llm = [p for label, p in demo_models() if "LLM" in label]
    if not llm:
        pytest.skip("the demo LLM is built at set-up (make demo-llm)")
    w = wb.window
    w.resize(1024, 700)
    w.show()
    qtbot.waitUntil(lambda: w.isVisible())
    w.show_generation(True)
    from app.llm_serving.controller import LLMServingController

    wb.room(LLMServingController).model_changed(str(Path(llm[0]).parent))
    w.dock("Traffic").show()
    qtbot.wait(200)
    hint = w.minimumSizeHint()
    assert hint.width() <= 1024 and hint.height() <= 700, (hint, ROOT)
    assert (w.width(), w.height()) == (1024, 700)
    serving, runs = w.dock("LLM Serving"), w.dock("Runs")
    assert serving.isVisible()
    if runs.isVisible() and not w.tabifiedDockWidgets(runs).count(serving):
        assert not serving.geometry().intersects(runs.geometry())
    from app.traffic.controller import TrafficController

    plot = wb.room(TrafficController).view.serving_plot
    assert plot.glw.minimumHeight() >= 150  # each of its two plots has room for its labels


def test_quit_ends_the_app_with_a_session_window_open(
    wb: Workbench, qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#29: with a read-only session window open, File > Quit hid the main window and the
    process and its engine kept running until killed."""
    import app.shell.workbench as workbench_mod
    from engine.session import SessionStore

    teammate = tmp_path / "teammate.opscope"
    SessionStore.create_or_open(teammate).close()
    quits: list[bool] = []
    monkeypatch.setattr(workbench_mod, "quit_app", lambda: quits.append(True))
    wb.window.show()
    wb.open_session(str(teammate))
    (viewer,) = wb.session_windows
    assert viewer.isVisible()  # type: ignore[attr-defined]
    quit_action = next(a for a in wb.window.findChildren(QAction) if a.text() == "&Quit")
    quit_action.trigger()
    assert quits == [True]
    assert not viewer.isVisible() and not wb.window.isVisible()  # type: ignore[attr-defined]


def test_a_variant_builds_progress_and_cancel_are_in_view_at_1024_by_700(
    wb: Workbench, qtbot: QtBot
) -> None:
    """#29: the bar and Cancel sat in the scrolled Configuration panel, below the fold;
    they sit above the scrolled part now, whatever it is scrolled to."""
    from PySide6.QtCore import QPoint, QRect
    from PySide6.QtWidgets import QScrollArea

    w = wb.window
    w.resize(1024, 700)
    w.show()
    qtbot.waitUntil(lambda: w.isVisible())
    panel = w.config_panel
    panel.show_progress("attempt 2 of 9, about 40 s left at most: calibration batch 3/16", 3, 9)
    qtbot.waitUntil(lambda: panel.cancel.isVisible())
    scroll = w.config_dock.findChild(QScrollArea)
    assert scroll is not None
    scroll.verticalScrollBar().setValue(scroll.verticalScrollBar().maximum())
    window = QRect(QPoint(0, 0), w.size())
    for widget in (panel.progress, panel.cancel):
        top_left = widget.mapTo(w, QPoint(0, 0))
        assert window.contains(QRect(top_left, widget.size())), widget
        assert not scroll.widget().isAncestorOf(widget)  # not scrolled away
    assert "attempt 2 of 9" in panel.progress.toolTip()


def test_cancel_drops_the_cancelled_builds_warnings(wb: Workbench) -> None:
    """#29: after Cancel, the running config went on and the cancelled static INT8
    build's warning about its calibration data showed as if it were the run's."""
    notices = wb.controller.notices
    notices.build_started()
    assert not notices.warning("INT8 static calibrated on generated data")  # held back
    wb.window.config_panel.show_progress("attempt 1 of 9", 0, 9)
    wb.window.config_panel.cancel.click()
    assert notices.run_started() is None  # the old config resumed: nothing of the build's
    assert notices.current == []
