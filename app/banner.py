"""A dismissable message strip above the plots: engine crashes (with Restart) and errors."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

STYLES = {
    "error": "background:#5c1f1f; color:#ffdede; border:1px solid #a33;",
    "warning": "background:#4d3b12; color:#ffefc2; border:1px solid #a8842a;",
    "info": "background:#1d3553; color:#dbe9ff; border:1px solid #3a6ea5;",
}


class Banner(QFrame):
    """Shows one message at a time; `action` is an optional button (e.g. Restart engine)."""

    action_clicked = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("banner")
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.text.setTextFormat(self.text.textFormat().PlainText)  # file text stays text
        self.action = QPushButton()
        self.action.clicked.connect(self.action_clicked)
        self.close_button = QPushButton("Dismiss")
        self.close_button.clicked.connect(self.hide)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.action)
        layout.addWidget(self.close_button)
        self.hide()

    def show_message(self, level: str, message: str, action: str | None = None) -> None:
        self.setStyleSheet(f"QFrame#banner {{{STYLES.get(level, STYLES['info'])}}}")
        self.text.setText(message)
        self.action.setVisible(bool(action))
        self.action.setText(action or "")
        self.show()
