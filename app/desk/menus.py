"""What a room declares to the shell as data: its menu entries (`MenuItem`) and where its
dock goes (`DockPlace`). The shell builds the menu bar from every room's items, in the
order of its menus; no room touches a QMenu."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

MENUS = ("&File", "&Run", "&View", "&Help")  # the menu bar, left to right

Area = Literal["left", "bottom"]


@dataclass(frozen=True)
class MenuItem:
    """One entry of a menu. `slot` takes the checked state when `checkable`."""

    menu: str  # one of MENUS
    text: str
    slot: Callable[..., object]
    shortcut: str | None = None  # a QKeySequence string, or a StandardKey's name ("Open")
    tip: str = ""
    checkable: bool = False
    checked: bool = False
    separator_before: bool = False
    submenu: str | None = None  # an entry of a submenu ("&Demo Models")
    key: str = ""  # a name the shell finds the action by (Run > Pause's text changes)


@dataclass(frozen=True)
class DockPlace:
    """Where a room's dock goes: its area, the dock it is tabbed with (by title), whether
    it waits for a model of its kind (hidden until one runs), its View menu shortcut."""

    area: Area = "bottom"
    tab_with: str | None = None  # the title of a dock it shares tabs with
    below: str | None = None  # the title of a dock it is split under (left area)
    shortcut: str | None = None  # View menu: show or hide it
    model_kind: bool = False  # shown only while a model of its kind runs (generation)
    scroll: bool = True  # its widget scrolls inside its share (never widens the window)
    raise_after: str | None = None  # the dock raised in its tab group after it is added
    tall: bool = False  # while its tab is shown, the docks of its area take half the window
