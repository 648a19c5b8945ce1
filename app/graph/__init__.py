"""The Graph room: the model's graph, laid out by the graph job, with the live profile on
it (app/graph/controller.py), in a dock tabbed with the roofline (app/graph/view.py)."""

from __future__ import annotations

from app.desk import Desk, DockPlace
from app.graph.controller import GraphController
from app.graph.view import GraphPanel

TITLE = "Graph"


def install(desk: Desk) -> GraphController:
    panel = GraphPanel()
    # tall: the bottom docks grow to half the window while it is the tab shown
    dock = desk.add_dock(
        TITLE,
        panel,
        DockPlace(tab_with="Roofline", scroll=False, raise_after="Roofline", tall=True),
    )
    controller = GraphController(desk, panel)
    dock.visibilityChanged.connect(controller.shown)
    return controller
