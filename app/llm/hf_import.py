"""File > Import Hugging Face Model…: a model folder built into a genai folder by
onnxruntime-genai's builder (engine/backends/genai/hf_import.py) on a worker thread, with a
progress dialog that cancels it (the builder process is killed, nothing is left behind),
then opened like any model."""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox, QProgressDialog, QWidget

from engine.api import OpScopeError, Progress


class ImportJob(QObject):
    """Runs one import; `progress(done, total, text)`, then `finished(ok, path or error)`,
    or `finished(False, "cancelled")` after `cancel()`."""

    progress = Signal(int, int, str)
    finished = Signal(bool, str)

    def __init__(
        self, source: str, output: str, precision: str = "fp32", parent: QObject | None = None
    ) -> None:
        super().__init__(parent)  # the window keeps it alive while it runs
        self.source, self.output, self.precision = source, output, precision
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._work, name="opscope-import", daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        """Stops at the builder's next output line (it prints one per layer)."""
        self._stop.set()

    def wait(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _work(self) -> None:
        from engine.api import ImportRequest, import_hf

        gen = import_hf(ImportRequest(self.source, self.output, self.precision))
        try:
            while True:
                if self._stop.is_set():
                    gen.close()  # kills the builder, removes its scratch folder
                    self.finished.emit(False, "cancelled")
                    return
                try:
                    item = next(gen)
                except StopIteration as done:
                    self.finished.emit(True, str(done.value))
                    return
                if isinstance(item, Progress):
                    self.progress.emit(int(item.done), int(item.total or 0), item.message)
        except (OpScopeError, OSError) as exc:
            self.finished.emit(False, str(exc))


def free_folder(source: Path) -> Path:
    """`<source>-genai` next to the source, or -2, -3... when taken."""
    out = source.with_name(f"{source.name}-genai")
    n = 2
    while out.exists():
        out = source.with_name(f"{source.name}-genai-{n}")
        n += 1
    return out


def import_interactively(parent: QWidget, open_model: object) -> ImportJob | None:
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
    job = ImportJob(folder, str(out), precision, parent)
    dialog = QProgressDialog(f"Building {out.name}…", "Cancel", 0, 0, parent)
    dialog.setWindowTitle("Import Hugging Face Model")
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
            open_model(result)  # type: ignore[operator]
        elif result != "cancelled":
            QMessageBox.warning(parent, "Cannot import the model", result)

    job.progress.connect(progress)
    job.finished.connect(finished)
    job.start()
    return job
