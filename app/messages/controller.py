"""The Messages room's controller: keeps what the desk says the window told the user
(`Desk.said`), newest first, a message repeated at once counted rather than listed again,
at most KEEP of them, shown by level."""

from __future__ import annotations

import time
from dataclasses import dataclass

from PySide6.QtCore import QObject

from app.desk import Desk
from app.messages.port import MessagesViewPort

KEEP = 500
LEVELS = ("error", "warning", "info")


@dataclass
class Said:
    at: float  # time.time() of its last saying
    level: str
    text: str
    times: int = 1


class MessagesController(QObject):
    def __init__(self, desk: Desk, view: MessagesViewPort) -> None:
        super().__init__()
        self.view = view
        self.messages: list[Said] = []  # oldest first
        self.level = "all"
        desk.said.connect(self.hear)
        view.clear_requested.connect(self.clear)
        view.level_picked.connect(self.pick_level)
        self._show()

    def hear(self, level: str, text: str, at: float | None = None) -> None:
        now = time.time() if at is None else at
        last = self.messages[-1] if self.messages else None
        if last is not None and (last.level, last.text) == (level, text):
            last.times += 1
            last.at = now
        else:
            self.messages.append(Said(now, level, text))
            del self.messages[:-KEEP]
        self._show()

    def clear(self) -> None:
        self.messages.clear()
        self._show()

    def pick_level(self, level: str) -> None:
        self.level = level
        self._show()

    def _show(self) -> None:
        shown = [m for m in reversed(self.messages) if self.level in ("all", m.level)]
        self.view.show_rows(
            [
                (
                    time.strftime("%H:%M:%S", time.localtime(m.at)),
                    m.level,
                    m.text + (f" (×{m.times})" if m.times > 1 else ""),
                )
                for m in shown
            ]
        )
        counts = {lv: sum(m.times for m in self.messages if m.level == lv) for lv in LEVELS}
        self.view.set_summary(
            ", ".join(f"{n} {lv}{'s' if n != 1 else ''}" for lv, n in counts.items())
            if self.messages
            else "nothing said yet"
        )
