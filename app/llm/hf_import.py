"""File > Import Hugging Face Model…: a model folder built into a genai folder by
onnxruntime-genai's builder (engine/backends/genai/hf_import.py) as a job in the engine host
(app/host/job_runner.py), with a progress dialog that cancels it (the builder process is
killed, nothing is left behind), then opened like any model. A GGUF file or a Hugging Face
folder opened directly (File > Open, `opscope MODEL`, a recent file) is imported the same
way into OpScope's cache, and reused from there the next time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QFileDialog, QInputDialog, QProgressDialog, QWidget

from app.host.job_runner import JobRunner
from engine.api import ImportRequest, Progress

CONCERN = "import"

Say = Callable[[str], None]  # one line to the user, as an error


class ImportJob(QObject):
    """Runs one import through `runner`; `progress(done, total, text)`, then
    `finished(ok, path or error)`, or `finished(False, "cancelled")` after `cancel()`."""

    progress = Signal(int, int, str)
    finished = Signal(bool, str)

    def __init__(
        self,
        runner: JobRunner,
        source: str,
        output: str,
        precision: str = "fp32",
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)  # the window keeps it alive while it runs
        self.runner = runner
        self.request = ImportRequest(source, output, precision)

    def start(self) -> None:
        self.runner.start(
            CONCERN,
            self.request,
            on_done=lambda path: self.finished.emit(True, str(path)),
            on_failed=lambda why: self.finished.emit(False, why),
            on_events=self._events,
            on_cancelled=lambda: self.finished.emit(False, "cancelled"),
        )

    def cancel(self) -> None:
        """The builder is killed and its scratch folder removed."""
        self.runner.cancel(CONCERN)

    @property
    def running(self) -> bool:
        return bool(self.runner.busy(CONCERN))

    def _events(self, batch: list[Any]) -> None:
        for item in batch:
            if isinstance(item, Progress):
                self.progress.emit(int(item.done), int(item.total or 0), item.message)


def free_folder(source: Path) -> Path:
    """`<source>-genai` next to the source, or -2, -3... when taken."""
    out = source.with_name(f"{source.name}-genai")
    n = 2
    while out.exists():
        out = source.with_name(f"{source.name}-genai-{n}")
        n += 1
    return out


def import_interactively(
    parent: QWidget, runner: JobRunner, open_model: Callable[[str], None], say: Say
) -> ImportJob | None:
    """Ask for the folder and precision, run the import under a progress dialog, and open
    the result with `open_model(path)`. Returns the running job (None when cancelled)."""
    folder = QFileDialog.getExistingDirectory(
        parent, "Import Hugging Face Model (config.json, *.safetensors, tokenizer)"
    )
    if not folder:
        return None
    precision, ok = QInputDialog.getItem(
        parent, "Import Hugging Face Model", "Weights:", ["fp32", "int4"], 0, False
    )
    if not ok:
        return None
    out = free_folder(Path(folder))
    job = ImportJob(runner, folder, str(out), precision, parent)
    return _run_with_dialog(parent, job, f"Building {out.name}…", open_model, say)


def import_and_open(
    parent: QWidget, runner: JobRunner, source: str, open_model: Callable[[str], None], say: Say
) -> ImportJob:
    """A GGUF file or Hugging Face folder opened directly: imported at fp32 into the cache
    (reused when it was imported before) under a progress dialog, then opened."""
    job = ImportJob(runner, source, "", "fp32", parent)
    return _run_with_dialog(parent, job, f"Importing {Path(source).name}…", open_model, say)


def _run_with_dialog(
    parent: QWidget, job: ImportJob, label: str, open_model: Callable[[str], None], say: Say
) -> ImportJob:
    dialog = QProgressDialog(label, "Cancel", 0, 0, parent)
    dialog.setWindowTitle("Import Language Model")
    dialog.setWindowModality(Qt.WindowModality.WindowModal)
    dialog.setMinimumDuration(0)
    dialog.canceled.connect(job.cancel)

    def progress(done: int, total: int, text: str) -> None:
        dialog.setMaximum(total)
        dialog.setValue(done)
        dialog.setLabelText(text)

    def finished(ok: bool, result: str) -> None:
        dialog.reset()
        if ok:
            open_model(result)
        elif result != "cancelled":
            say(f"Cannot import the model: {result}")

    job.progress.connect(progress)
    job.finished.connect(finished)
    job.start()
    return job
