"""The Memory dock's widgets: Measure and Cancel, a status line, the header naming the input
shapes and config a report was measured for (marked when stale), a generating model's KV
cache and phase peaks in words, and the report drawn by widgets/memory_view.py. Widgets,
signals and setters only: app/memory/controller.py decides."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from widgets.memory_view import MemoryView
from widgets.models.llm_memory_rows import llm_lines

NO_MODEL = "load a model, then Measure: weights, the activation peak, what a session holds"
STALE_STYLE = "color: #b3261e; font-weight: bold"


def header_text(report: dict[str, Any]) -> str:
    """The inputs and config a report was measured for: 'For input_ids 1x128, mask 1x128 ·
    fp32, batch 1'."""
    shapes = ", ".join(f"{k} {'x'.join(map(str, v))}"
                       for k, v in (report.get("inputs") or {}).items())  # fmt: skip
    config = report.get("config") or {}
    knobs = ", ".join(
        f"{k} {config[k]}" if k == "batch" else str(config[k])
        for k in ("precision", "batch")
        if config.get(k) is not None
    )
    return "For " + " · ".join(p for p in (shapes or "inputs not recorded", knobs) if p)


class MemoryPanel(QWidget):
    measure_requested = Signal()
    cancel_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.measure_button = QPushButton("Measure")
        self.measure_button.setToolTip(
            "Weights by dtype, the activation peak as loaded and as run, the resident memory "
            "of a session (in a process of its own) and where load time goes, for the config "
            "and inputs shown (live timing pauses meanwhile)"
        )
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.status = QLabel(NO_MODEL)
        self.status.setWordWrap(True)
        self.header = QLabel("")  # the shapes and config measured for; stale when moved
        self.header.setWordWrap(True)
        self.header.setTextFormat(Qt.TextFormat.PlainText)
        self.header.hide()
        self.stale = False
        self.view = MemoryView()
        # a generating model's KV cache and its prefill's and decode's peaks (hidden otherwise)
        self.llm = QLabel("")
        self.llm.setTextFormat(Qt.TextFormat.PlainText)
        self.llm.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.llm.setWordWrap(True)
        self.llm.hide()
        row = QHBoxLayout()
        row.addWidget(self.measure_button)
        row.addWidget(self.cancel_button)
        row.addWidget(self.status, 1)
        layout = QVBoxLayout()  # set once filled (tests/test_widget_items.py)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(row)
        layout.addWidget(self.header)
        layout.addWidget(self.llm)
        layout.addWidget(self.view, 1)
        self.setLayout(layout)
        self.measure_button.clicked.connect(self.measure_requested)
        self.cancel_button.clicked.connect(self.cancel_requested)

    # setters ---------------------------------------------------------------------------
    def set_status(self, text: str) -> None:
        self.status.setText(text)

    def set_running(self, running: bool) -> None:
        self.measure_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)

    def set_report(self, report: dict[str, Any] | None) -> None:
        """The report drawn, with a generating model's rows in words (None: none), under a
        header naming the shapes it was measured for (fresh)."""
        self.view.set_report(report)
        self.header.setText(header_text(report) if report is not None else "")
        self.header.setVisible(report is not None)
        self.set_stale(None)
        lines = llm_lines(report)
        self.llm.setText("\n".join(lines))
        self.llm.setVisible(bool(lines))

    def set_stale(self, why: str | None) -> None:
        """The drawn report marked stale (`why`: what moved), or fresh (None)."""
        self.stale = why is not None and self.view.report is not None
        base = self.header.text().split("\n")[0]
        self.header.setText(f"{base}\n{why}" if self.stale else base)
        self.header.setStyleSheet(STALE_STYLE if self.stale else "")
        self.view.setEnabled(not self.stale)  # greyed: the figures are another workload's
