"""The one way the window tells the user something (`Notices.notify(level, text, key,
action)`): an error or a warning goes to the banner above the plots (`key`: a later
message with the same key replaces it, `clear(key)` drops it; `action`: its button),
information to the status bar for a few seconds. A window without a banner (a read-only
session window) says everything in its status bar, errors until the next message."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

from PySide6.QtWidgets import QStatusBar

Level = Literal["info", "warning", "error"]
INFO_MS = 8000


class Banner(Protocol):
    """The strip of messages above the plots (app/shell/banner.py)."""

    def show_message(
        self, level: str, message: str, action: str | None = None, key: str | None = None
    ) -> None: ...
    def clear(self, *keys: str, prefix: str | None = None) -> None: ...


class Notices:
    def __init__(self, banner: Banner | None, status: QStatusBar) -> None:
        self.banner, self.status = banner, status
        self.listeners: list[Callable[[Level, str], None]] = []  # hear every message said

    def notify(
        self, level: Level, text: str, key: str | None = None, action: str | None = None
    ) -> None:
        if self.banner is not None and (level != "info" or key is not None or action):
            self.banner.show_message(level, text, action=action, key=key)
        else:
            self.status.showMessage(text, INFO_MS if level == "info" else 0)
        for hear in self.listeners:
            hear(level, text)

    def clear(self, key: str) -> None:
        if self.banner is not None:
            self.banner.clear(key)
