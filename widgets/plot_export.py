"""Save a pyqtgraph layout (all its plots, legends and markers) as PNG or SVG."""

from __future__ import annotations

from pathlib import Path

import pyqtgraph as pg
import pyqtgraph.exporters as pg_exporters
from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor, QPainter
from PySide6.QtSvg import QSvgGenerator

FORMATS = (".png", ".svg")


def check_format(path: str) -> str:
    """The lower-case extension of `path`; ValueError unless it is .png or .svg."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(
            f"images are written as .png or .svg files, not {suffix or 'no extension'!r}: {path}"
        )
    return suffix


def export_layout(
    widget: pg.GraphicsLayoutWidget, path: str, background: QColor, title: str = "OpScope"
) -> None:
    """Write `widget`'s central layout to `path`, the format chosen by its extension."""
    suffix = check_format(path)
    if widget.ci.sceneBoundingRect().width() < 1:  # never laid out (not shown yet)
        widget.resize(1000, 600)
    if suffix == ".png":
        pg_exporters.ImageExporter(widget.ci).export(str(path))
        return
    try:
        pg_exporters.SVGExporter(widget.ci).export(str(path))
    except ValueError:
        # pyqtgraph 0.14.0 cannot parse the closed paths ("M... Z") that Qt 6.11's
        # QSvgGenerator writes for every ViewBox clip (pyqtgraph issue #3495), so every
        # plot fails; let Qt write the SVG itself until pyqtgraph's exporter copes.
        _export_svg_with_qt(widget, path, background, title)


def _export_svg_with_qt(
    widget: pg.GraphicsLayoutWidget, path: str, background: QColor, title: str
) -> None:
    source = widget.ci.sceneBoundingRect()
    target = QRectF(0, 0, source.width(), source.height())
    generator = QSvgGenerator()
    generator.setFileName(str(path))
    generator.setSize(target.size().toSize())
    generator.setViewBox(target)
    generator.setTitle(title)
    painter = QPainter(generator)
    try:
        painter.fillRect(target, background)
        widget.scene().render(painter, target, source)
    finally:
        painter.end()
