"""The Messages dock's widgets: a level filter, a summary, Clear, and the table of
messages (time, level, text; the text wraps, the table scrolls)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

COLOURS = {"error": "#e06c6c", "warning": "#d9a43c", "info": ""}


class MessagesPanel(QWidget):
    clear_requested = Signal()
    level_picked = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.level = QComboBox()
        for text, key in (("All", "all"), ("Errors", "error"), ("Warnings", "warning"),
                          ("Information", "info")):  # fmt: skip
            self.level.addItem(text, key)
        self.level.setToolTip("Show the messages of one level")
        self.summary = QLabel()
        self.summary.setMinimumWidth(1)
        self.clear_button = QPushButton("Clear")
        self.table = QTableWidget(0, 3)
        self.table.setHorizontalHeaderLabels(["Time", "Level", "Message"])
        self.table.verticalHeader().hide()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setWordWrap(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        top = QHBoxLayout()
        top.addWidget(self.level)
        top.addWidget(self.summary, 1)
        top.addWidget(self.clear_button)
        lay = QVBoxLayout()  # filled, then set (tests/test_widget_items.py)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addLayout(top)
        lay.addWidget(self.table, 1)
        self.setLayout(lay)
        self.clear_button.clicked.connect(self.clear_requested)
        self.level.currentIndexChanged.connect(
            lambda _i: self.level_picked.emit(self.level.currentData())
        )

    def show_rows(self, rows: list[tuple[str, str, str]]) -> None:
        self.table.setRowCount(len(rows))
        for r, (at, level, text) in enumerate(rows):
            for c, value in enumerate((at, level, text)):
                item = QTableWidgetItem(value)
                item.setTextAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
                if c == 1 and COLOURS[level]:
                    item.setForeground(QColor(COLOURS[level]))
                self.table.setItem(r, c, item)
        self.table.resizeRowsToContents()

    def set_summary(self, text: str) -> None:
        self.summary.setText(text)
