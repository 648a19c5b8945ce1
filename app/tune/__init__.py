"""The Tune room: a search over configs on the loaded model, the trials as they end on a
scatter with the Pareto front, the best one's command, and a trial applied live with a
double-click (app/tune/controller.py), in a dock tabbed with the Traffic dock
(app/tune/view.py)."""

from __future__ import annotations

from app.desk import Desk, DockPlace
from app.tune.controller import TuneController
from app.tune.view import TuneDock

TITLE = "Tune"


def install(desk: Desk) -> TuneController:
    view = TuneDock()
    desk.add_dock(
        TITLE, view, DockPlace(tab_with="Traffic", shortcut="Ctrl+Shift+U", raise_after="Operators")
    )
    return TuneController(desk, view)
