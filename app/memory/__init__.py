"""The Memory room: the memory job (engine/run/memory_job.py, as `opscope memory`) on the
desk's workload, live timing paused meanwhile (app/memory/controller.py), its report drawn
in a dock tabbed with Scaling (app/memory/view.py)."""

from __future__ import annotations

from app.desk import Desk, DockPlace
from app.memory.controller import MemoryController
from app.memory.view import MemoryPanel

TITLE = "Memory"


def install(desk: Desk) -> MemoryController:
    panel = MemoryPanel()
    desk.add_dock(TITLE, panel, DockPlace(tab_with="Scaling", raise_after="Operators"))
    return MemoryController(desk, panel)
