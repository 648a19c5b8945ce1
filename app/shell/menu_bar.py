"""The menu bar, built from `MenuItem`s (app/desk/menus.py): the shell's own and every
room's, each menu in the order its items were declared; the View menu ends with every
dock's show/hide toggle."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMainWindow, QMenu

from app.desk.menus import MENUS, MenuItem


def key_sequence(shortcut: str) -> QKeySequence:
    """A shortcut as "Ctrl+Shift+O", or a StandardKey's name ("Open", "HelpContents")."""
    standard = getattr(QKeySequence.StandardKey, shortcut, None)
    return QKeySequence(standard) if standard is not None else QKeySequence(shortcut)


class MenuBar:
    def __init__(self, window: QMainWindow) -> None:
        self.window = window
        bar = window.menuBar()
        self.menus: dict[str, QMenu] = {name: bar.addMenu(name) for name in MENUS}
        self.submenus: dict[tuple[str, str], QMenu] = {}
        self.actions: dict[str, QAction] = {}  # by MenuItem.key
        self._toggles: QAction | None = None  # the View menu's separator before the docks

    def menu(self, name: str, submenu: str | None = None) -> QMenu:
        menu = self.menus[name]
        if submenu is None:
            return menu
        key = (name, submenu)
        if key not in self.submenus:
            self.submenus[key] = self._before_toggles(menu, submenu)
        return self.submenus[key]

    def _before_toggles(self, menu: QMenu, title: str) -> QMenu:
        sub = QMenu(title, menu)
        if menu is self.menus["&View"] and self._toggles is not None:
            menu.insertMenu(self._toggles, sub)
        else:
            menu.addMenu(sub)
        return sub

    def add(self, items: Sequence[MenuItem]) -> None:
        for item in items:
            self._add(item)

    def _add(self, item: MenuItem) -> None:
        menu = self.menu(item.menu, item.submenu)
        before = self._toggles if item.menu == "&View" and item.submenu is None else None
        if item.separator_before:
            sep = QAction(menu)
            sep.setSeparator(True)
            menu.insertAction(before, sep) if before is not None else menu.addAction(sep)
        action = QAction(item.text, menu)
        if item.checkable:
            action.setCheckable(True)
            action.setChecked(item.checked)
            action.toggled.connect(item.slot)
        else:
            action.triggered.connect(lambda _=False, slot=item.slot: slot())
        if item.shortcut:
            action.setShortcut(key_sequence(item.shortcut))
        if item.tip:
            action.setStatusTip(item.tip)
        if before is not None:
            menu.insertAction(before, action)
        else:
            menu.addAction(action)
        if item.key:
            self.actions[item.key] = action

    def add_dock_toggles(self) -> None:
        """Every dock's show/hide, so a closed one comes back from here (not only from a
        dock title's context menu), in the order the window made them."""
        view = self.menus["&View"]
        self._toggles = view.addSeparator()
        for dock in self.window.findChildren(QDockWidget):
            toggle = dock.toggleViewAction()
            toggle.setStatusTip(f"Show or hide the {dock.windowTitle().split(' — ')[0]} panel")
            view.addAction(toggle)
