"""An axis title that cannot run into its neighbour's: written across, small, in the top
left corner of the plot it names. Stacked plots a few dozen pixels tall drew their
vertical titles into each other ("samples/s latency (ms)")."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QGraphicsSimpleTextItem


def corner_title(plot: pg.PlotItem, text: str, color: QColor) -> QGraphicsSimpleTextItem:
    """Put `text` in `plot`'s top-left corner (fixed in pixels: it stays while the view
    pans) and drop the vertical title of its left axis."""
    plot.setLabel("left", None)
    plot.getAxis("left").showLabel(False)
    item = QGraphicsSimpleTextItem(text, plot.vb)  # a child of the view box, not its data
    item.setFont(title_font(item.font()))
    item.setBrush(QBrush(color))
    item.setPos(4, 1)
    item.setZValue(1e6)  # over the curves
    return item


def title_font(base: QFont) -> QFont:
    """A point smaller than the text around it: a title, not a reading."""
    font = QFont(base)
    font.setPointSizeF(max(font.pointSizeF() - 1.0, 7.0))
    return font
