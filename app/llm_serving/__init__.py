"""The LLM Serving room: a generating model's serving layouts simulated side by side and
one served for real (app/llm_serving/controller.py), in a dock tabbed with the operators,
shown while a generating model runs (app/llm_serving/view.py)."""

from __future__ import annotations

from app.desk import Desk, DockPlace
from app.llm_serving.controller import LLMServingController
from app.llm_serving.view import LLMServingPanel

TITLE = "LLM Serving"
SHORTCUT = "Ctrl+Shift+M"


def install(desk: Desk) -> LLMServingController:
    panel = LLMServingPanel()
    # hidden until a generating model runs (a saved layout does not show it before one);
    # its form scrolls inside its share rather than widen a 1024 px window
    place = DockPlace(
        tab_with="Operators", model_kind=True, shortcut=SHORTCUT, raise_after="Operators"
    )
    frame = desk.add_dock(TITLE, panel, place)
    return LLMServingController(desk, panel, frame)
