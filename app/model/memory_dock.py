"""The Memory dock: Measure runs the memory job (engine/run/memory_job.py, as `opscope
memory`) through the window's one runner on the model, config and inputs the window shows,
live timing paused meanwhile; Cancel stops it; the report is drawn by widgets/memory_view.py
and a failure is one line."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from engine.api import MemoryRequest, ModelInfo, Notice, Progress, genai_folder
from widgets.memory_view import MemoryView
from widgets.models.llm_memory_rows import llm_lines

CONCERN = "memory"
NO_MODEL = "load a model, then Measure: weights, the activation peak, what a session holds"


class MemoryDock(QWidget):
    def __init__(self, workbench: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.wb = workbench
        self.measure_button = QPushButton("Measure")
        self.measure_button.setToolTip(
            "Weights by dtype, the activation peak as loaded and as run, the resident memory "
            "of a session (in a process of its own) and where load time goes, for the config "
            "and inputs shown (live timing pauses meanwhile)"
        )
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.status = QLabel(NO_MODEL)
        self.status.setWordWrap(True)
        self.view = MemoryView()
        # a generating model's KV cache and its prefill's and decode's peaks (hidden otherwise)
        self.llm = QLabel("")
        self.llm.setTextFormat(Qt.TextFormat.PlainText)
        self.llm.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.llm.setWordWrap(True)
        self.llm.hide()
        row = QHBoxLayout()
        row.addWidget(self.measure_button)
        row.addWidget(self.cancel_button)
        row.addWidget(self.status, 1)
        layout = QVBoxLayout()  # set once filled (tests/test_widget_items.py)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(row)
        layout.addWidget(self.llm)
        layout.addWidget(self.view, 1)
        self.setLayout(layout)
        self.model: str | None = None
        self.measure_button.clicked.connect(self.measure)
        self.cancel_button.clicked.connect(lambda: self.wb.jobs.cancel(CONCERN))

    @property
    def running(self) -> bool:
        return bool(self.wb.jobs.busy(CONCERN))

    def model_loaded(self, info: ModelInfo) -> None:
        """Another model: the last one's report goes (timing resumed re-announces the same
        model: its report and the last word stay)."""
        if info.path == self.model or self.running:
            return
        self.model = info.path
        self.view.set_report(None)
        self._show_llm(None)
        self.status.setText(f"{info.name}: Measure for its memory at the shapes shown")

    def measure(self) -> None:
        load = self.wb.client.last_load
        if not load or self.running:
            self.status.setText("load a model first" if not load else "measuring already")
            return
        inputs = self.wb.client.job_inputs()
        self.wb.recording.flush()
        # a generating model: at the prompt and new tokens the Generation dock shows
        panel = self.wb.window.generation
        generating = genai_folder(load[0]) is not None
        request = MemoryRequest(load[0], self.wb.window.config_panel.config(),
                                dict(inputs.shapes), dict(inputs.dims),
                                session=str(self.wb.recording.path),
                                prompt_len=panel.prompt_len.value() if generating else None,
                                new_tokens=panel.new_tokens.value() if generating else None,
                                **inputs.data_files())  # fmt: skip
        self.wb.pause_for(CONCERN, "paused: measuring memory")  # the probe gets the cores
        self.measure_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.status.setText("measuring: live timing is paused")
        self.wb.jobs.start(
            CONCERN,
            request,
            on_done=self._done,
            on_failed=lambda why: self._end(f"memory failed: {why}"),
            on_events=self._events,
            on_cancelled=lambda: self._end("memory cancelled"),
        )

    def _events(self, batch: list[Any]) -> None:
        for item in batch:
            if isinstance(item, Progress) and item.stage == "memory":
                self.status.setText(f"measuring: {item.message}")
            elif isinstance(item, Notice) and item.level in ("warning", "info"):
                self.status.setText(item.message)

    def _done(self, report: dict[str, Any]) -> None:
        self.view.set_report(report)
        self._show_llm(report)
        self._end(f"measured on {report.get('provider_used')}, resident memory in a process "
                  "of its own; the report is in the session")  # fmt: skip

    def _end(self, text: str) -> None:
        self.measure_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        self.status.setText(text)
        self.wb.resume_after(CONCERN)

    def _show_llm(self, report: dict[str, Any] | None) -> None:
        lines = llm_lines(report)
        self.llm.setText("\n".join(lines))
        self.llm.setVisible(bool(lines))
