"""Issue 53: ticking Live on the LLM Serving dock with the settings of the last simulation
recorded the same study again. Live now studies only what changed; the Simulate button
(the user asking) still runs it again. Against spec'd doubles, none given an attribute."""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

import pytest

pytest.importorskip("PySide6")
from pytestqt.qtbot import QtBot

from app.desk import Desk
from app.llm_serving.controller import LIVE_MS, LLMServingController
from app.llm_serving.port import DockFrame, LLMServingViewPort
from tests.conftest import DEMO_LLM
from widgets.models.llm_serving_form import ServingForm


def _ends(desk: Any) -> None:
    """The study the desk was last asked to run ends, done."""
    desk.run_on_workload.call_args.kwargs["on_done"]([])


def test_live_does_not_simulate_again_what_did_not_change(qtbot: QtBot) -> None:
    view = MagicMock(spec=LLMServingViewPort)
    view.form.return_value = ServingForm(requests=8, prompt_len="16-48", new_tokens="6")
    view.live_on.return_value = True
    desk = MagicMock(spec=Desk)
    desk.jobs.busy.return_value = False
    c = LLMServingController(desk, view, MagicMock(spec=DockFrame))
    c.model_changed(str(DEMO_LLM))
    (toggled,) = view.live_toggled.connect.call_args.args
    (changed,) = view.settings_changed.connect.call_args.args

    c.simulate()  # the Simulate button
    _ends(desk)
    assert desk.run_on_workload.call_count == 1
    toggled(True)  # Live ticked, nothing changed
    qtbot.wait(LIVE_MS + 300)
    assert desk.run_on_workload.call_count == 1  # no second, identical study
    assert "not run (or recorded) again" in view.set_status.call_args.args[0]

    view.form.return_value = ServingForm(requests=16, prompt_len="16-48", new_tokens="6")
    changed()  # a setting changed under Live: a study of it
    qtbot.waitUntil(lambda: desk.run_on_workload.call_count == 2, timeout=5000)
    _ends(desk)
    changed()  # a change that changes nothing (set back to what it was): none
    qtbot.wait(LIVE_MS + 300)
    assert desk.run_on_workload.call_count == 2

    c.simulate()  # asked for: it runs, the same settings or not
    assert desk.run_on_workload.call_count == 3
