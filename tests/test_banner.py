"""The banner shows the newest of the most severe messages: an error is never hidden behind
a later warning (the bad-model error once was, behind 'the roofs are provisional')."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from app.shell.banner import Banner


def test_an_error_stays_in_front_of_later_warnings(qtbot: QtBot) -> None:
    b = Banner()
    qtbot.addWidget(b)
    b.show_message("error", "load failed: corrupt.onnx", key="error:load")
    b.show_message("warning", "the machine's roofs are provisional", key="peaks")
    assert b.text.text() == "load failed: corrupt.onnx" and b.more.text() == "+1 more"
    b.dismiss()
    assert b.text.text() == "the machine's roofs are provisional"
    b.show_message("info", "note", key="n")
    assert b.text.text() == "the machine's roofs are provisional"  # a warning over a note
    b.clear("peaks")
    assert b.text.text() == "note"
