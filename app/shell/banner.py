"""A dismissable message strip above the plots: engine crashes (with Restart), errors, and
warnings about the running config.

Each message has a key; a message goes away when it no longer applies (its key cleared:
a run's warnings when the next config starts, an apply error when one succeeds), or when
dismissed. The newest of the most severe is shown (an error is never hidden behind a later
warning or note), with a count of the others behind it.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

STYLES = {
    "error": "background:#5c1f1f; color:#ffdede; border:1px solid #a33;",
    "warning": "background:#4d3b12; color:#ffefc2; border:1px solid #a8842a;",
    "info": "background:#1d3553; color:#dbe9ff; border:1px solid #3a6ea5;",
}


class Banner(QFrame):
    """Shows the newest message; `action` is an optional button (e.g. Restart engine)."""

    action_clicked = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("banner")
        self._items: dict[str, tuple[str, str, str | None]] = {}  # key -> level, text, action
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.text.setTextFormat(self.text.textFormat().PlainText)  # file text stays text
        self.more = QLabel()
        self.action = QPushButton()
        self.action.clicked.connect(self.action_clicked)
        self.close_button = QPushButton("Dismiss")
        self.close_button.clicked.connect(self.dismiss)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.more)
        layout.addWidget(self.action)
        layout.addWidget(self.close_button)
        self.hide()

    def show_message(
        self, level: str, message: str, action: str | None = None, key: str | None = None
    ) -> None:
        """Show `message` now; a later message with the same key replaces it."""
        key = key or f"{level}:{message}"
        self._items.pop(key, None)
        self._items[key] = (level, message, action)
        self._show_newest()

    def clear(self, *keys: str, prefix: str | None = None) -> None:
        """Drop the messages that no longer apply: by key, or every key with `prefix`."""
        gone = [k for k in self._items if k in keys or (prefix and k.startswith(prefix))]
        for k in gone:
            del self._items[k]
        if gone:
            self._show_newest()

    def clear_all(self) -> None:
        self._items.clear()
        self._show_newest()

    def keys(self) -> list[str]:
        return list(self._items)

    def messages(self) -> list[str]:
        return [text for _, text, _ in self._items.values()]

    def dismiss(self) -> None:
        """The shown message goes; the one behind it (if any) shows."""
        if self._items:
            self._items.pop(self._shown_key())
        self._show_newest()

    def _shown_key(self) -> str:
        """The newest message of the most severe level present."""
        rank = {"error": 0, "warning": 1}
        best = min(rank.get(level, 2) for level, _, _ in self._items.values())
        return next(k for k in reversed(self._items) if rank.get(self._items[k][0], 2) == best)

    def _show_newest(self) -> None:
        if not self._items:
            self.text.clear()
            self.hide()
            return
        level, message, action = self._items[self._shown_key()]
        self.setStyleSheet(f"QFrame#banner {{{STYLES.get(level, STYLES['info'])}}}")
        self.text.setText(message)
        others = len(self._items) - 1
        self.more.setText(f"+{others} more" if others else "")
        self.more.setVisible(others > 0)
        self.action.setVisible(bool(action))
        self.action.setText(action or "")
        self.show()
