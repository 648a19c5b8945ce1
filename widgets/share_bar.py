"""The op table's share column: a horizontal bar behind the percentage text."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, Qt
from PySide6.QtGui import QColor, QPainter, QPalette
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from widgets import theme
from widgets.op_table_model import SORT_ROLE

_Index = QModelIndex | QPersistentModelIndex


class ShareBarDelegate(QStyledItemDelegate):
    """Draws the share as a horizontal bar behind its percentage text."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: _Index) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        text, opt.text = opt.text, ""
        widget = opt.widget
        style = widget.style() if widget is not None else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, widget)
        share = index.data(SORT_ROLE)
        share = min(max(float(share), 0.0), 1.0) if isinstance(share, float) else 0.0
        rect: QRect = opt.rect.adjusted(3, 4, -3, -4)
        painter.save()
        bar = QColor(theme.THROUGHPUT)
        bar.setAlpha(110)
        painter.fillRect(
            QRect(rect.left(), rect.top(), round(rect.width() * share), rect.height()), bar
        )
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        role = QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text
        painter.setPen(opt.palette.color(role))
        painter.setFont(opt.font)
        painter.drawText(
            rect.adjusted(0, 0, -2, 0),
            int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter),
            text,
        )
        painter.restore()
