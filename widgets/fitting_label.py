"""One line of live text said in the longest of its wordings that fits the width it is
given, the whole first wording in its tooltip (nothing is lost when a narrow window
leaves it less room). It paints its own text and never asks for a relayout as the text
changes (a QLabel's setText relayouts the window: widgets/theme.py `make_steady`)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QPainter, QPaintEvent
from PySide6.QtWidgets import QSizePolicy, QWidget

MARGIN = 8  # px beside the text, as a steady label's


class FittingLabel(QWidget):
    """As narrow as `shortest` and as wide as `longest` would make it; `about` follows the
    whole text in the tooltip."""

    def __init__(
        self, shortest: str, longest: str, about: str = "", parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.about = about
        self.wordings: tuple[str, ...] = ("",)
        metrics = self.fontMetrics()
        self._least = metrics.horizontalAdvance(shortest) + MARGIN
        self._most = metrics.horizontalAdvance(longest) + MARGIN
        self.setFixedHeight(metrics.height() + 4)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.setAutoFillBackground(True)  # only the label repaints, not what is beneath
        self.setToolTip(about)

    def minimumSizeHint(self) -> QSize:
        return QSize(self._least, self.height())

    def sizeHint(self) -> QSize:
        return QSize(self._most, self.height())

    def set_wordings(self, wordings: Sequence[str]) -> None:
        """The text, longest wording first (each shorter one says less of the same)."""
        wordings = tuple(wordings) or ("",)
        if wordings == self.wordings:
            return
        self.wordings = wordings
        self.setToolTip("\n".join(t for t in (wordings[0], self.about) if t))
        self.update()

    def text(self) -> str:
        """The whole text (the first wording), whatever is shown."""
        return self.wordings[0]

    def shown_text(self) -> str:
        """What is painted: the longest wording that fits, else the shortest cut."""
        metrics, room = self.fontMetrics(), self.contentsRect().width() - MARGIN
        for wording in self.wordings:
            if metrics.horizontalAdvance(wording) <= room:
                return wording
        return metrics.elidedText(self.wordings[-1], Qt.TextElideMode.ElideRight, room)

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        rect = self.contentsRect().adjusted(MARGIN // 2, 0, -(MARGIN // 2), 0)
        align = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
        painter.drawText(rect, int(align), self.shown_text())
