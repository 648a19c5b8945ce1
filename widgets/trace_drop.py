"""A trace file dropped on a view (the Traffic and LLM Serving rooms' docks): one local
file with a trace's suffix is taken (`set_trace(path)`), anything else is left to the
window (which opens models and sessions)."""

from __future__ import annotations

from PySide6.QtGui import QDragEnterEvent, QDropEvent

TRACE_SUFFIXES = (".csv", ".jsonl", ".json", ".txt")


def trace_of(event: QDragEnterEvent | QDropEvent) -> str | None:
    urls = event.mimeData().urls() if event.mimeData().hasUrls() else []
    paths = [u.toLocalFile() for u in urls if u.isLocalFile()]
    if len(paths) == 1 and paths[0].lower().endswith(TRACE_SUFFIXES):
        return paths[0]
    return None


class TraceDrops:
    """Mixed into a QWidget that calls setAcceptDrops(True) and has `set_trace(path)`."""

    def set_trace(self, path: str) -> None:  # pragma: no cover - the dock's own
        raise NotImplementedError

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if trace_of(event):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event: QDropEvent) -> None:
        path = trace_of(event)
        if path:
            self.set_trace(path)
            event.acceptProposedAction()
        else:
            event.ignore()
