"""What the Messages room's controller needs of its view (app/messages/view.py)."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import SignalInstance


class MessagesViewPort(Protocol):
    @property
    def clear_requested(self) -> SignalInstance: ...  # ()
    @property
    def level_picked(self) -> SignalInstance: ...  # (str): "all", "error", "warning", "info"

    def show_rows(self, rows: list[tuple[str, str, str]]) -> None: ...  # time, level, text
    def set_summary(self, text: str) -> None: ...
