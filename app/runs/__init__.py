"""The Runs room: every run of the live session, a row each (its id and kind as the file
has them, its model, config, inputs and figures), fed from the host's events and, for the
runs a tune or a sweep records from a process of its own, read back from the session file
(app/runs/controller.py); painted by the runs table (widgets/runs_table.py), in a dock
tabbed with the roofline."""

from __future__ import annotations

from app.desk import Desk, DockPlace
from app.runs.controller import RunsController
from widgets.models.runs_summary import RunsSummary
from widgets.runs_table import RunsTable

TITLE = "Runs"


def install(desk: Desk) -> RunsController:
    summary = RunsSummary()
    table = RunsTable(summary)
    desk.add_dock(TITLE, table, DockPlace(tab_with="Roofline", raise_after="Runs", scroll=False))
    return RunsController(desk, table, summary, parent=table)  # goes with its table
