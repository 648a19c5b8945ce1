"""The Messages room: every message the window told the user (errors, warnings, and the
status bar's passing information), with its time, kept while the window is open: a banner
replaced by a newer one or a status line gone after eight seconds can be read again here."""

from __future__ import annotations

from app.desk import Desk, DockPlace
from app.messages.controller import MessagesController
from app.messages.view import MessagesPanel

TITLE = "Messages"


def install(desk: Desk) -> MessagesController:
    panel = MessagesPanel()
    desk.add_dock(TITLE, panel, DockPlace(tab_with="Runs", scroll=False, raise_after="Runs"))
    return MessagesController(desk, panel)
