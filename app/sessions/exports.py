"""Report and trace exports from the menu: an export job (engine/analysis/export_job.py) run
through the window's one runner (app/host/job_runner.py, in a process of the engine host's),
a strip above the plots that says what is being written and for how long, with Cancel, then
"Report saved: PATH" with Open; errors as one line of text."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QTimer, QUrl
from PySide6.QtGui import QAction, QDesktopServices
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMenu,
    QProgressBar,
    QPushButton,
    QWidget,
)

from app.host.job_runner import JobRunner
from engine.api import ExportRequest, OpScopeError

STYLE = "QFrame#export_notice { background:#1d3553; color:#dbe9ff; border:1px solid #3a6ea5; }"
FAILED = "QFrame#export_notice { background:#5c1f1f; color:#ffdede; border:1px solid #a33; }"
ALL_RUNS = "All traceable runs"


def trace_choices(session_path: str) -> list[tuple[str, int | None]]:
    """The run picker's entries: each traceable run (newest first), named by its id, kind,
    model, inputs and config, then all of them."""
    from engine.api import open_session_file, run_label, traceable_runs

    runs = traceable_runs(session_path)
    with open_session_file(session_path) as reader:
        rows = {r.id: r for r in reader.runs()}
    labels = [(run_label(rows[rid]) if rid in rows else label, rid) for rid, label in runs]
    return [*reversed(labels), *([(ALL_RUNS, None)] if runs else [])]


def pick_trace_run(
    parent: QWidget, session_path: str, say: Callable[[str], None], selected: Sequence[int] = ()
) -> tuple[bool, int | None]:
    """Ask which run to trace (the selected one first, else the newest); (False, None)
    when cancelled or there is none (`say` says why)."""
    try:
        choices = trace_choices(session_path)
    except (OpScopeError, OSError) as exc:
        say(f"Cannot export a trace: {exc}")
        return False, None
    if not choices:
        say(
            f"Nothing to trace: in {Path(session_path).name} no run has a profile, a serving "
            "or a generation record (profile a model, run load or generate first)"
        )
        return False, None
    labels = [label for label, _ in choices]
    first = next((i for i, (_, rid) in enumerate(choices) if rid in selected), 0)
    label, ok = QInputDialog.getItem(parent, "Export Trace", "Run to export:", labels, first, False)
    if not ok:
        return False, None
    return True, dict(choices)[label]


def ask_and_export(
    parent: QWidget,
    kind: str,
    session_path: str,
    notice: ExportNotice,
    selected: Sequence[int] = (),
    before: Callable[[], None] | None = None,
) -> None:
    """Export's menu action: the run (a trace), the output file, then the notice."""
    run_id = None
    if kind == "trace":
        ok, run_id = pick_trace_run(parent, session_path, notice.say, selected)
        if not ok:
            return
    report = kind == "report"
    suffix = ".html" if report else ".json"
    filt = "HTML report (*.html)" if report else "Chrome trace (*.json)"
    stem = Path(session_path).with_suffix("").name + ("" if run_id is None else f"-run{run_id}")
    path, _ = QFileDialog.getSaveFileName(parent, f"Export {kind.title()}", stem + suffix, filt)
    if not path:
        return
    if before is not None:
        before()  # the live session: what is recorded so far reaches the file first
    notice.start(kind, session_path, path, run_id)  # a long session takes seconds


def add_export_actions(
    window: QWidget,
    menu: QMenu,
    session_path: Callable[[], str],
    notice: ExportNotice,
    selected: Callable[[], Sequence[int]] = lambda: (),
    before: Callable[[], None] | None = None,
) -> list[QAction]:
    """File > Export Report… and Export Trace… for the session `session_path()` names."""
    out = []
    for kind, text, keys, tip in (
        ("report", "Export &Report…", "Ctrl+Shift+E", "Write a self-contained HTML report"),
        ("trace", "Export &Trace…", "Ctrl+Shift+T",
         "Write a run (you pick which) as a Chrome/Perfetto trace"),
    ):  # fmt: skip
        action = QAction(text, window)
        action.setShortcut(keys)
        action.setToolTip(tip)
        action.setStatusTip(tip)
        action.triggered.connect(
            lambda _=False, k=kind: ask_and_export(
                window, k, session_path(), notice, selected(), before
            )
        )
        menu.addAction(action)
        out.append(action)
    return out


class ExportNotice(QFrame):
    """One export at a time: a busy bar, the seconds so far and Cancel while it is written,
    then the saved path with Open (or the error). `jobs` runs the export job."""

    def __init__(self, jobs: JobRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("export_notice")
        self.jobs = jobs
        self.concern = f"export-{id(self)}"  # each window's exports are its own concern
        self.text = QLabel()
        self.text.setTextFormat(self.text.textFormat().PlainText)
        self.text.setWordWrap(True)
        self.bar = QProgressBar()
        self.bar.setRange(0, 0)  # busy: the writers report no fraction done
        self.bar.setFixedWidth(90)
        self.bar.setTextVisible(False)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel)
        self.open_button = QPushButton("Open")
        self.open_button.clicked.connect(self.open_saved)
        self.dismiss = QPushButton("Dismiss")
        self.dismiss.clicked.connect(self.hide)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 4, 10, 4)
        layout.addWidget(self.bar)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.cancel_button)
        layout.addWidget(self.open_button)
        layout.addWidget(self.dismiss)
        self.saved: str | None = None
        self._what = ""
        self._path = ""
        self._started = 0.0
        self._tick = QTimer(self, interval=500)
        self._tick.timeout.connect(self._show_elapsed)
        self.hide()

    @property
    def busy(self) -> bool:
        return self.jobs.busy(self.concern)

    def start(self, kind: str, session: str, path: str, run_id: int | None = None) -> None:
        """Write `kind` ("report" or "trace": of run `run_id`, or every traceable run) of
        `session` to `path` in the background."""
        self._what, self._path, self.saved = kind, path, None
        self._started = time.monotonic()
        self.setStyleSheet(STYLE)
        self.bar.show()
        self.cancel_button.show()
        self.open_button.hide()
        self.dismiss.hide()
        self._show_elapsed()
        self.show()
        self._tick.start()
        request = ExportRequest(kind, session, path, run_id)
        self.jobs.start(
            self.concern, request, self._done, self._failed, on_cancelled=self._cancelled
        )

    def cancel(self) -> None:
        """Stop the export: the file it would replace stays as it was."""
        self.jobs.cancel(self.concern)

    def close_jobs(self) -> None:
        """The window is closing: its export stops, unheard."""
        self.jobs.forget(self.concern)

    def open_saved(self) -> None:
        if self.saved:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(Path(self.saved).resolve())))

    def _show_elapsed(self) -> None:
        seconds = time.monotonic() - self._started
        self.text.setText(f"Writing {self._what} {self._path}… {seconds:.0f} s")

    def _done(self, _path: object) -> None:
        self._tick.stop()
        self.saved = self._path
        seconds = time.monotonic() - self._started
        self.text.setText(f"{self._what.title()} saved: {self._path} ({seconds:.1f} s)")
        self.bar.hide()
        self.cancel_button.hide()
        self.open_button.show()
        self.dismiss.show()

    def _cancelled(self) -> None:
        self._tick.stop()
        self.text.setText(f"{self._what.title()} cancelled: {self._path} was not written")
        self.bar.hide()
        self.cancel_button.hide()
        self.open_button.hide()
        self.dismiss.show()

    def _failed(self, error: str) -> None:
        self.say(f"Cannot export {self._what}: {error}")

    def say(self, text: str) -> None:
        """Why nothing is exported, in the strip (the window's place for its exports)."""
        self._tick.stop()
        self.setStyleSheet(FAILED)
        self.text.setText(text)
        self.show()
        self.bar.hide()
        self.cancel_button.hide()
        self.open_button.hide()
        self.dismiss.show()
