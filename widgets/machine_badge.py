"""How busy the machine is, beside the figures it colours: 'machine quiet' or, in the
warning colour, "BUSY 1.9/2 CPUs" (others took 1.9 of 2), the reason on hover. Fed
the engine's latest window of contention (a ContentionSample, about once a second)."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QWidget

from engine.api import Contention
from widgets import theme

EMPTY = "machine -"


def badge_text(c: Contention | None) -> str:
    """The badge's words: what the figures beside it were measured on."""
    if c is None:
        return EMPTY
    if not c.busy:
        return "machine quiet" + (f" (nice {c.nice})" if c.nice > 0 else "")
    if c.others_cpu >= 0.25 or not c.nice:
        return f"BUSY {c.others_cpu:.1f}/{c.cpus} CPUs"
    return f"BUSY: niced ({c.nice})"


class MachineBadge(QLabel):
    """A label that says how busy the machine was over the last window."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(EMPTY, parent)
        self.contention: Contention | None = None
        self.setToolTip("How busy the machine is while OpScope measures (updated each second)")
        theme.make_steady(self, "BUSY 88.8/888 CPUs")

    def set_contention(self, c: Contention | None) -> None:
        self.contention = c
        theme.set_text_if_changed(self, badge_text(c))
        busy = c is not None and c.busy
        self.setStyleSheet(f"color: {theme.WARN}; font-weight: bold;" if busy else "")
        self.setToolTip(
            (c.line() + ("; the figures beside it are the model's speed on a busy machine"
                         if busy else ""))
            if c is not None
            else "How busy the machine is while OpScope measures (updated each second)"
        )  # fmt: skip
