"""A line of text over the middle of a plot while it has nothing to show for a known
reason ("measuring this machine's peaks, once"); hidden otherwise."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import QLabel, QWidget


class PlotNotice(QLabel):
    """Centred over `over`, following its size; `say(None)` hides it."""

    def __init__(self, over: QWidget) -> None:
        super().__init__(over)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setWordWrap(True)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.setStyleSheet(
            "QLabel { background: rgba(29, 53, 83, 215); color: #dbe9ff; "
            "border: 1px solid #3a6ea5; border-radius: 4px; padding: 10px 16px; }"
        )
        over.installEventFilter(self)
        self.hide()

    def say(self, text: str | None) -> None:
        if not text:
            self.hide()
            return
        self.setText(text)
        self._place()
        self.show()
        self.raise_()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize and self.isVisible():
            self._place()
        return False

    def _place(self) -> None:
        parent = self.parentWidget()
        if parent is None:
            return
        width = min(460, max(200, parent.width() - 40))
        self.setFixedWidth(width)
        self.adjustSize()
        self.move((parent.width() - width) // 2, max(0, (parent.height() - self.height()) // 3))
