"""The Scaling dock: `opscope sweep` of the loaded model over one dim's sizes, run as its
own process (live timing paused; its points and the sweep as a whole recorded in the
window's session), drawn on log-log axes with each op type's growth exponent."""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

from PySide6.QtCore import QProcess, QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine.api import EXIT_INTERRUPTED, ModelInfo, cli_argv
from widgets.scaling_plot import ScalingPlot

KILL_AFTER_MS = 10_000  # a sweep that does not stop on SIGTERM (stuck in a library call)


NO_MODEL = "load a model, pick a dim and sizes"


class ScalingDock(QWidget):
    def __init__(self, workbench: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.wb = workbench
        self.dim = QComboBox()
        self.dim.setEditable(True)
        # wide enough for a dim's name ("sequence", "batch_size"): an editable combo box
        # otherwise starts narrow and clips it ("equence" at 1600 px)
        self.dim.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.dim.setMinimumContentsLength(9)
        self.dim.setToolTip("A symbolic dim of the model's inputs (or an input's name)")
        self.values = QLineEdit("64,128,256,512")
        self.values.setToolTip("Sizes to time and profile, comma-separated")
        self.run_button = QPushButton("Run sweep")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.status = QLabel(NO_MODEL)
        self.status.setWordWrap(True)
        self.plot = ScalingPlot()
        row = QHBoxLayout()
        row.addWidget(QLabel("Vary"))
        row.addWidget(self.dim)
        row.addWidget(QLabel("over"))
        row.addWidget(self.values, 1)
        row.addWidget(self.run_button)
        row.addWidget(self.cancel_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(row)
        layout.addWidget(self.status)
        layout.addWidget(self.plot, 1)
        self.process: QProcess | None = None
        self.kept_partial = False  # the running sweep said it stored its points done
        self.out = Path(tempfile.mkdtemp(prefix="opscope-sweep-")) / "sweep.json"
        self.resume = False
        self.run_button.clicked.connect(self.run)
        self.cancel_button.clicked.connect(self.cancel)

    def model_loaded(self, info: ModelInfo) -> None:
        dims = sorted({d for v in info.inputs for d in (v.shape or ()) if isinstance(d, str)})
        dims = [d for d in dims if d != "batch"] + (["batch"] if "batch" in dims else [])
        self.dim.clear()
        self.dim.addItems(dims or [v.name for v in info.inputs])
        if self.status.text() == NO_MODEL:  # the first hint only: a sweep's result stays
            self.status.setText(f"{info.name}: pick a dim and sizes, then Run sweep")

    def run(self) -> None:
        load = self.wb.client.last_load
        if not load or self.process is not None:
            self.status.setText("load a model first" if not load else "a sweep is running")
            return
        config = self.wb.window.config_panel.config()
        self.wb.recording.flush()
        program, *prefix = cli_argv()
        argv = [
            *prefix, "sweep", load[0],
            "--vary", f"{self.dim.currentText()}={self.values.text()}",
            "--engine", config.engine, "--precision", config.precision,
            "--fusion", config.fusion, "--batch", str(config.batch),
            "--threads", str(config.threads), "--provider", config.provider,
            "--json", str(self.out), "--session", str(self.wb.recording.path),
            *self.wb.client.job_inputs().argv(skip_dims=(self.dim.currentText(),)),
        ]  # fmt: skip
        self.resume = self.wb.running
        if self.wb.running:
            self.wb.toggle_running("paused: scaling sweep")  # the sweep gets the cores
        proc = QProcess(self)
        proc.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        proc.readyReadStandardOutput.connect(self._output)
        proc.finished.connect(self._finished)
        self.process = proc
        self.kept_partial = False
        self.run_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.status.setText("sweeping: live timing is paused")
        proc.start(program, argv)

    def cancel(self) -> None:
        """SIGTERM: the sweep stops as on Ctrl+C and keeps the points done in the session;
        killed if it has not ended within KILL_AFTER_MS."""
        proc = self.process
        if proc is not None:
            proc.terminate()
            QTimer.singleShot(KILL_AFTER_MS, lambda: self._kill(proc))

    def _kill(self, proc: QProcess) -> None:
        if self.process is proc and proc.state() != QProcess.ProcessState.NotRunning:
            proc.kill()

    def _output(self) -> None:
        if self.process is None:
            return
        text = bytes(self.process.readAllStandardOutput().data()).decode(errors="replace")
        self.kept_partial = self.kept_partial or ", partial: " in text
        lines = [ln for ln in text.splitlines() if ln.startswith(("point", "opscope:"))]
        if lines:
            self.status.setText(lines[-1])
        if any(ln.startswith("point") for ln in lines) and self.out.is_file():
            with contextlib.suppress(OSError, ValueError):  # written atomically after each
                self.plot.set_sweep(json.loads(self.out.read_text()))

    def _finished(self, code: int, _status: object) -> None:
        proc, self.process = self.process, None
        self.run_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        if self.resume and not self.wb.running:
            self.wb.toggle_running()
        if code != 0 or not self.out.is_file():
            self.out.unlink(missing_ok=True)  # the points done stay drawn (and in the session)
            tail = bytes(proc.readAll().data()).decode(errors="replace").strip() if proc else ""
            if code == EXIT_INTERRUPTED or code < 0 or proc is None:
                kept = self.kept_partial or ", partial: " in tail  # the points done, stored
                self.status.setText(
                    "sweep cancelled" + (": the points done are in the session" if kept else "")
                )
            else:
                last = tail.splitlines()[-1] if tail else f"exit {code}"
                self.status.setText(f"sweep failed: {last}")
            return
        data = json.loads(self.out.read_text())
        self.out.unlink()
        self.plot.set_sweep(data)
        g = data["growth"]
        soft = g["op_types"].get("Softmax")
        self.status.setText(
            f"total ~ {data['vary']['dim']}^{g['total']:.2f}"
            + (f"; Softmax ~ ^{soft:.2f}" if soft is not None else "")
            + " (fitted over the upper half of the sizes"
            + (f"; {g['caveat']}" if g.get("caveat") else "")
            + "); the sweep is in the session"
        )
