"""The LLM Serving dock and the calibration: its own Measure again button (not the command
line's --recalibrate), progress with the time left, the calibration's reuse said in the
study's last line, and a cancelled calibration said to keep its rounds."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("PySide6")
from PySide6.QtWidgets import QCheckBox, QPushButton

from app.llm_serving.controller import REMEDY
from app.llm_serving.view import LLMServingPanel
from engine.events import Notice, Progress
from tests.test_llm_serving_controller import _controller, started
from widgets.models.llm_serving_form import ServingForm

FORM = ServingForm(requests=8, prompt_len="16-48", new_tokens="6")


def test_the_dock_measures_again_with_its_own_button(qtbot: Any) -> None:
    dock = LLMServingPanel()
    qtbot.addWidget(dock)
    texts = [b.text() for b in dock.findChildren(QPushButton)]
    assert "Measure again" in texts
    assert not any("calibrat" in b.text().lower() for b in dock.findChildren(QCheckBox))
    with qtbot.waitSignal(dock.remeasure_requested, timeout=1000):
        dock.measure_again.click()
    dock.set_running(True)  # not twice at once
    assert not dock.measure_again.isEnabled()
    dock.show_progress(30, 120, "calibration: prefill 512, round 2; about 90 s left")
    assert dock.progress.value() == 250 and "90 s left" in dock.progress.format()


def test_measure_again_asks_for_a_new_calibration_in_the_windows_words(qapp: Any) -> None:
    c, dock, desk = _controller(FORM)
    c.simulate()
    request, _ = started(desk)
    assert request.remeasure is False and request.remedy == REMEDY
    assert "--" not in REMEDY and "Measure again" in REMEDY
    c._cancelled()
    c.measure_again()
    request, callbacks = started(desk)
    assert request.kind == "simulate" and request.remeasure is True
    callbacks["on_events"]([
        Progress("calibration", 30.0, 120.0, "prefill 512, round 2; about 90 s left"),
    ])  # fmt: skip
    dock.show_progress.assert_called_with(
        30.0, 120.0, "calibration: prefill 512, round 2; about 90 s left"
    )
    callbacks["on_cancelled"]()
    status = dock.set_status.call_args.args[0]
    assert "calibration cancelled" in status and "kept" in status


def test_the_last_line_says_the_calibration_was_reused(qapp: Any) -> None:
    c, dock, desk = _controller(FORM)
    c.simulate()
    _, callbacks = started(desk)
    reused = "LLM calibration from 2026-12-06 12:40, reused (24 points)"
    callbacks["on_events"]([Notice("info", reused)])
    callbacks["on_done"]([])
    assert reused in dock.set_status.call_args.args[0]


def test_before_any_study_the_table_lists_each_layout_waiting(qtbot: Any) -> None:
    """An empty table read as a broken one: each layout a study compares has its row."""
    from widgets.models.llm_serving_table import LAYOUT_ORDER, LLMServingTable

    dock = LLMServingPanel()
    qtbot.addWidget(dock)
    dock.show_table(LLMServingTable(), None, None)
    rows = dock.table.rowCount()
    names = [dock.table.item(r, 0).text() for r in range(rows)]
    assert names == list(LAYOUT_ORDER)
    assert all(dock.table.item(r, 1).text() == "not yet" for r in range(rows))
