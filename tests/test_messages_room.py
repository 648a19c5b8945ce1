"""The Messages room: what the window told the user, kept and listed (the controller against
doubles; then the real window: a notice said through the one path lands in the dock)."""

from __future__ import annotations

from pathlib import Path
from unittest.mock import MagicMock

import pytest
from pytestqt.qtbot import QtBot

from app.desk import Desk
from app.messages.controller import KEEP, MessagesController
from app.messages.port import MessagesViewPort

pytestmark = pytest.mark.usefixtures("qapp")


def test_messages_newest_first_repeats_counted_filtered_by_level_and_capped() -> None:
    view = MagicMock(spec=MessagesViewPort)
    room = MessagesController(MagicMock(spec=Desk), view)
    view.set_summary.assert_called_with("nothing said yet")
    room.hear("warning", "INT8: 3 nodes kept in FP32", at=0.0)
    room.hear("error", "graph failed: x.onnx: not a model", at=1.0)
    room.hear("error", "graph failed: x.onnx: not a model", at=2.0)
    rows = view.show_rows.call_args.args[0]
    assert [(level, text) for _t, level, text in rows] == [
        ("error", "graph failed: x.onnx: not a model (×2)"),
        ("warning", "INT8: 3 nodes kept in FP32"),
    ]
    view.set_summary.assert_called_with("2 errors, 1 warning, 0 infos")
    room.pick_level("warning")
    assert [r[1] for r in view.show_rows.call_args.args[0]] == ["warning"]
    for i in range(KEEP + 10):
        room.hear("info", f"message {i}")
    assert len(room.messages) == KEEP and room.messages[-1].text == f"message {KEEP + 9}"
    room.clear()
    view.show_rows.assert_called_with([])


def test_a_notice_said_in_the_window_is_listed_in_the_messages_dock(
    qtbot: QtBot, tmp_path: Path
) -> None:
    from app.shell.workbench import Workbench

    wb = Workbench(session_path=str(tmp_path / "m.opscope"), usable=["cpu"])
    qtbot.addWidget(wb.window)
    try:
        room = wb.room(MessagesController)
        wb.window.notify("error", "load failed: a.onnx: truncated", key="error:load")
        wb.desk.notify("info", "wrote b.opscope")
        assert [(m.level, m.text) for m in room.messages][-2:] == [
            ("error", "load failed: a.onnx: truncated"),
            ("info", "wrote b.opscope"),
        ]
        table = wb.window.dock("Messages").widget().table  # type: ignore[attr-defined]
        assert table.item(0, 2).text() == "wrote b.opscope"
    finally:
        wb.shutdown()
