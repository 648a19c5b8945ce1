"""The Memory dock's widgets: Measure and Cancel, a status line, a generating model's KV
cache and phase peaks in words, and the report drawn by widgets/memory_view.py. Widgets,
signals and setters only: app/memory/controller.py decides."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from widgets.memory_view import MemoryView
from widgets.models.llm_memory_rows import llm_lines

NO_MODEL = "load a model, then Measure: weights, the activation peak, what a session holds"


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
        """The report drawn, with a generating model's rows in words (None: none)."""
        self.view.set_report(report)
        lines = llm_lines(report)
        self.llm.setText("\n".join(lines))
        self.llm.setVisible(bool(lines))
