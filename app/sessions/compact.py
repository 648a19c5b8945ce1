"""Keep the window usable at 1024x700: pickers whose longest entry ("All (everything ONNX
Runtime has)") would otherwise set the side panel's width, and so the window's."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QComboBox, QFrame, QLabel, QScrollArea, QWidget

MIN_CHARS = 14  # a picker shows at least this many characters; the popup shows all
# a dock property: the dock shows only while its kind of model runs (a generating model's
# Generation and LLM Serving docks), so a restored layout hides it until one loads
MODEL_KIND_DOCK = "opscope_model_kind"


def compact_pickers(panel: QWidget) -> None:
    """Pickers in `panel` size to MIN_CHARS, not to their longest entry; the full text of
    the current entry stays in its tooltip."""
    for combo in panel.findChildren(QComboBox):
        combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        combo.setMinimumContentsLength(MIN_CHARS)
        combo.currentTextChanged.connect(lambda text, c=combo: c.setToolTip(text or c.toolTip()))


def scrolled(widget: QWidget, name: str = "") -> QScrollArea:
    """`widget` in a frameless scroll area: a dock whose content is wider or taller than
    its share of a 1024x700 window scrolls, instead of growing the window (the LLM Serving
    form used to push it to 1117x826 and draw over its neighbours)."""
    area = QScrollArea()
    area.setObjectName(name or f"{widget.objectName() or type(widget).__name__} scroll")
    area.setWidget(widget)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    return area


class ElidedLabel(QLabel):
    """A label that gives up width when the bar is crowded: its text is cut in the middle
    as it is painted (text() and the tooltip keep it whole)."""

    def minimumSizeHint(self) -> QSize:
        return QSize(
            self.fontMetrics().horizontalAdvance("session: …") + 8,
            super().minimumSizeHint().height(),
        )

    def sizeHint(self) -> QSize:
        return QSize(
            self.fontMetrics().horizontalAdvance(self.text()) + 8, super().sizeHint().height()
        )

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        rect = self.contentsRect()
        text = self.fontMetrics().elidedText(
            self.text(), Qt.TextElideMode.ElideMiddle, rect.width()
        )
        painter.drawText(rect, int(self.alignment()), text)
