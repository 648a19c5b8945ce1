"""The row above the latency plot: the trailing window's numbers (p50, samples/s, p90, p99
and what window they are over) left, how busy the machine was and Follow latest right."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QVBoxLayout

from widgets import theme
from widgets.generation_layer import GENERATION_TEMPLATE, GENERATION_TIP
from widgets.machine_badge import MachineBadge
from widgets.models.latency_series import window_text
from widgets.numbers import figure

STATS_TEMPLATE = (  # the longest header text: its label's fixed size
    "p50 888.8 ms · 88,888 samples/s · p90 888.8 ms · p99 888.8 ms\n"
    "over the last 8,888 inferences (88.8 min) of 888,888,888 since the config change"
)
STATS_TIP = (
    "p50/p90/p99 and samples/s over the running config's last inferences (the line "
    "below says how many, over how long); the Runs table's are over whole runs"
)


class StatsRow:
    """The header row's widgets in one layout (`layout`): `label` the numbers, `machine`
    the busy-machine badge, a button for `follow_action`."""

    def __init__(self, follow_action: QAction) -> None:
        self.label = theme.make_steady(QLabel("no samples yet"), STATS_TEMPLATE)
        self.label.setToolTip(STATS_TIP)
        follow_button = QToolButton()
        follow_button.setDefaultAction(follow_action)
        follow_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.layout = QHBoxLayout()
        self.layout.setContentsMargins(6, 2, 6, 0)
        self.layout.addWidget(self.label)
        self.layout.addStretch(1)
        self.machine = MachineBadge()  # how busy the machine was: beside the figures
        right = QVBoxLayout()  # stacked: the header stays as narrow as before
        right.setContentsMargins(0, 0, 0, 0)
        right.setSpacing(0)
        right.addWidget(self.machine, 0, Qt.AlignmentFlag.AlignRight)
        right.addWidget(follow_button, 0, Qt.AlignmentFlag.AlignRight)
        self.layout.addLayout(right)

    def set_generation(self, on: bool) -> None:
        theme.make_steady(self.label, GENERATION_TEMPLATE if on else STATS_TEMPLATE)
        self.label.setToolTip(GENERATION_TIP if on else STATS_TIP)

    def show(self, stats: dict[str, Any], total: int) -> None:
        """An encoder's numbers: `stats` of the trailing window, of `total` samples."""
        parts = [
            f"<b style='color:{color}'>{q}</b> {figure(stats[q])} ms"
            for q, color in (("p50", theme.P50), ("p90", theme.P90), ("p99", theme.P99))
        ]
        rate = stats["samples_per_s"]
        parts.insert(1, f"{figure(rate, 4)} samples/s")
        window = window_text(stats, total)  # two lines: fits 1024 px
        self.show_text(" · ".join(parts) + f"<br>{window}")

    def show_text(self, text: str) -> None:
        theme.set_text_if_changed(self.label, text)
