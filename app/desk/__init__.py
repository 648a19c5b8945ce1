"""The desk: the one surface a room of the window uses (app/desk/desk.py), and the data a
room declares its menu entries and docks with (app/desk/menus.py)."""

from app.desk.desk import NO_MODEL, Desk, Figures
from app.desk.menus import DockPlace, MenuItem
from app.desk.notices import Level

__all__ = ["NO_MODEL", "Desk", "DockPlace", "Figures", "Level", "MenuItem"]
