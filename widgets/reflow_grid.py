"""Cells laid out in as many columns as the width holds, re-flowed as it changes: a dock's
form of many small fields reads in four columns in a wide dock and in one in a narrow one,
and never makes its dock scroll sideways (its minimum width is one cell's).

A cell is any widget; `pair(label, field)` makes the usual one, a label right-aligned at
a width shared by every pair of the grid and its field."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QWidget


class ReflowGrid(QWidget):
    """Its cells placed by hand, in rows of as many as fit (no layout: a layout's own
    minimum would be the current columns', and the dock could never narrow them)."""

    def __init__(
        self, cells: Sequence[QWidget], spacing: int = 6, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.cells = list(cells)
        self.spacing = spacing
        self.row_spacing = 3
        for cell in self.cells:
            cell.setParent(self)
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

    @property
    def columns(self) -> int:
        return self.columns_for(self.width())

    def cell_width(self) -> int:
        """The widest cell's minimum (each column is at least this wide)."""
        return max((c.minimumSizeHint().width() for c in self.cells), default=0)

    def columns_for(self, width: int) -> int:
        fits = (width + self.spacing) // max(1, self.cell_width() + self.spacing)
        return max(1, min(len(self.cells), fits))

    def _row_height(self) -> int:
        return max((c.sizeHint().height() for c in self.cells), default=0)

    def heightForWidth(self, width: int) -> int:
        rows = -(-len(self.cells) // self.columns_for(width))
        return rows * self._row_height() + max(0, rows - 1) * self.row_spacing

    def hasHeightForWidth(self) -> bool:
        return True

    def minimumSizeHint(self) -> QSize:
        return QSize(self.cell_width(), self._row_height())  # its height: heightForWidth

    def sizeHint(self) -> QSize:
        width = len(self.cells) * (self.cell_width() + self.spacing) - self.spacing
        return QSize(width, self.heightForWidth(width))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        width = event.size().width()
        columns = self.columns_for(width)
        column = (width - (columns - 1) * self.spacing) / columns
        height = self._row_height()
        for i, cell in enumerate(self.cells):
            row, col = divmod(i, columns)
            x = round(col * (column + self.spacing))
            cell.setGeometry(x, row * (height + self.row_spacing), int(column), height)
        if self.height() != self.heightForWidth(width):
            self.updateGeometry()  # more or fewer rows: the parent's layout asks again


def pair(label: str, field: QWidget | QHBoxLayout, label_width: int = 0) -> QWidget:
    """A cell: `label` right-aligned (at least `label_width` wide) beside `field`."""
    cell = QWidget()
    row = QHBoxLayout()  # set once filled (tests/test_widget_items.py)
    row.setContentsMargins(0, 0, 0, 0)
    row.setSpacing(4)
    text = QLabel(label)
    text.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    if label_width:
        text.setMinimumWidth(label_width)
    row.addWidget(text)
    if isinstance(field, QHBoxLayout):
        row.addLayout(field, 1)
    else:
        row.addWidget(field, 1)
    cell.setLayout(row)
    return cell


def pairs(items: Sequence[tuple[str, QWidget | QHBoxLayout]], font_width: QWidget) -> list[QWidget]:
    """Cells for (label, field) items, their labels one width (that of the longest, in
    `font_width`'s font): the fields line up down each column."""
    metrics = font_width.fontMetrics()
    width = max((metrics.horizontalAdvance(label) for label, _ in items), default=0) + 2
    return [pair(label, field, width) for label, field in items]
