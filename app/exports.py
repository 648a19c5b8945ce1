"""Report and trace exports from the menu: engine functions run off the GUI thread (the one
way: app/background.py), a strip above the plots that says what is being written and for
how long, then "Report saved: PATH" with Open; errors as one line of text."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QTimer, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from app.background import Background
from engine.errors import OpScopeError

STYLE = "QFrame#export_notice { background:#1d3553; color:#dbe9ff; border:1px solid #3a6ea5; }"
FAILED = "QFrame#export_notice { background:#5c1f1f; color:#ffdede; border:1px solid #a33; }"


def export_report(session_path: str, out_path: str) -> str | None:
    """Write the HTML report; the error text on failure, None on success."""
    from engine.analysis.report import write_report

    try:
        write_report(session_path, out_path)
    except (OpScopeError, OSError) as exc:
        return str(exc)
    return None


def export_trace(session_path: str, out_path: str, run_id: int | None = None) -> str | None:
    """Write a Chrome/Perfetto trace of the last profiled run; the error text on failure."""
    from engine.analysis.export import write_trace

    try:
        write_trace(session_path, out_path, run_id)
    except (OpScopeError, OSError) as exc:
        return str(exc)
    return None


WRITERS: dict[str, Callable[[str, str], str | None]] = {
    "report": export_report,
    "trace": export_trace,
}


class ExportNotice(QFrame):
    """One export at a time: a busy bar and the seconds so far while it is written, then
    the saved path with Open (or the error). `job` runs the writer off the GUI thread."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("export_notice")
        self.job = Background("export", self)
        self.text = QLabel()
        self.text.setTextFormat(self.text.textFormat().PlainText)
        self.text.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setRange(0, 0)  # busy: the writers report no fraction done
        self.bar.setFixedWidth(90)
        self.bar.setTextVisible(False)
        self.open_button = QPushButton("Open")
        self.open_button.clicked.connect(self.open_saved)
        self.dismiss = QPushButton("Dismiss")
        self.dismiss.clicked.connect(self.hide)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 4, 10, 4)
        layout.addWidget(self.bar)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.open_button)
        layout.addWidget(self.dismiss)
        self.saved: str | None = None
        self.worker: str | None = None  # the thread that wrote the last export
        self._what = ""
        self._path = ""
        self._started = 0.0
        self._tick = QTimer(self, interval=500)
        self._tick.timeout.connect(self._show_elapsed)
        self.hide()

    @property
    def busy(self) -> bool:
        return self.job.busy

    def start(self, kind: str, session: str, path: str) -> None:
        """Write `kind` ("report" or "trace") of `session` to `path` in the background."""
        writer = WRITERS[kind]
        self._what, self._path, self.saved = kind, path, None
        self._started = time.monotonic()
        self.setStyleSheet(STYLE)
        self.bar.show()
        self.open_button.hide()
        self.dismiss.hide()
        self._show_elapsed()
        self.show()
        self._tick.start()

        def work() -> str | None:
            self.worker = threading.current_thread().name
            return writer(session, path)

        self.job.submit(work, self._done, self._failed)

    def open_saved(self) -> None:
        if self.saved:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(Path(self.saved).resolve())))

    def _show_elapsed(self) -> None:
        seconds = time.monotonic() - self._started
        self.text.setText(f"Writing {self._what} {self._path}… {seconds:.0f} s")

    def _done(self, error: str | None) -> None:
        if error:
            self._failed(error)
            return
        self._tick.stop()
        self.saved = self._path
        seconds = time.monotonic() - self._started
        self.text.setText(f"{self._what.title()} saved: {self._path} ({seconds:.1f} s)")
        self.bar.hide()
        self.open_button.show()
        self.dismiss.show()

    def _failed(self, error: str) -> None:
        self._tick.stop()
        self.setStyleSheet(FAILED)
        self.text.setText(f"Cannot export {self._what}: {error}")
        self.bar.hide()
        self.open_button.hide()
        self.dismiss.show()
