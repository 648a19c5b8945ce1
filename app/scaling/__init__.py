"""The Scaling room: a sweep of the desk's workload over one dim's sizes, or a generating
model's prompt sweep (app/scaling/controller.py), drawn on log-log axes with each op
type's growth in a dock tabbed with Tune (app/scaling/view.py)."""

from __future__ import annotations

from app.desk import Desk, DockPlace
from app.scaling.controller import ScalingController
from app.scaling.view import ScalingPanel

TITLE = "Scaling"


def install(desk: Desk) -> ScalingController:
    panel = ScalingPanel()
    desk.add_dock(TITLE, panel, DockPlace(tab_with="Tune", raise_after="Operators"))
    return ScalingController(desk, panel)
