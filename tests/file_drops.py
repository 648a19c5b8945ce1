"""A file dropped on a widget, as the desktop delivers it: a QDropEvent carrying the file's
URL (the docks' drop handlers read it; the suite and tests/afternoon.py both drop traces)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

KEEP: list[QMimeData] = []  # a QDropEvent does not own its data: kept alive here


def file_drop(path: Path) -> QDropEvent:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    KEEP.append(mime)
    return QDropEvent(
        QPointF(5, 5),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
    )
