"""The Memory room's controller: Measure runs the memory job (engine/run/memory_job.py, as
`opscope memory`) through the desk on its workload (the model, config and inputs shown; a
generating model at the prompt and new tokens it runs), live timing paused meanwhile;
Cancel stops it; the report is drawn and a failure is one line."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject

from app.desk import NO_MODEL, Desk
from app.memory.port import MemoryViewPort
from engine.api import MemoryRequest, ModelInfo, Notice, Progress, Workload, genai_folder

CONCERN = "memory"


class MemoryController(QObject):
    def __init__(self, desk: Desk, view: MemoryViewPort) -> None:
        super().__init__()
        self.desk, self.view = desk, view
        self.model: str | None = None
        view.measure_requested.connect(self.measure)
        view.cancel_requested.connect(lambda: desk.jobs.cancel(CONCERN))
        desk.model_loaded.connect(self.model_loaded)

    @property
    def running(self) -> bool:
        return bool(self.desk.jobs.busy(CONCERN))

    def model_loaded(self, info: ModelInfo) -> None:
        """Another model: the last one's report goes (timing resumed re-announces the same
        model: its report and the last word stay)."""
        if info.path == self.model or self.running:
            return
        self.model = info.path
        self.view.set_report(None)
        self.view.set_status(f"{info.name}: Measure for its memory at the shapes shown")

    def measure(self) -> None:
        if self.running:
            self.view.set_status("measuring already")
            return
        # running before the job starts: a job refused at once (no model, no engine host)
        # ends it inside run_on_workload
        self.view.set_running(True)
        self.view.set_status("measuring: live timing is paused")
        self.desk.run_on_workload(
            CONCERN,
            self._request,
            on_done=self._done,
            on_failed=self._failed,
            on_events=self._events,
            on_cancelled=lambda: self._end("memory cancelled"),
            pause="paused: measuring memory",  # the probe gets the cores
        )

    def _request(self, workload: Workload) -> MemoryRequest:
        # a generating model: at the prompt and new tokens it runs (the Generation dock's)
        shape = self.desk.generation_shape if genai_folder(workload.model) is not None else None
        return MemoryRequest(
            workload,
            prompt_len=shape[0] if shape else None,
            new_tokens=shape[1] if shape else None,
            session=self.desk.session_path,
        )

    def _events(self, batch: list[Any]) -> None:
        for item in batch:
            if isinstance(item, Progress) and item.stage == "memory":
                self.view.set_status(f"measuring: {item.message}")
            elif isinstance(item, Notice) and item.level in ("warning", "info"):
                self.view.set_status(item.message)

    def _done(self, report: dict[str, Any]) -> None:
        self.view.set_report(report)
        self._end(f"measured on {report.get('provider_used')}, resident memory in a process "
                  "of its own; the report is in the session")  # fmt: skip

    def _failed(self, why: str) -> None:
        self._end(why if why == NO_MODEL else f"memory failed: {why}")

    def _end(self, text: str) -> None:
        self.view.set_running(False)
        self.view.set_status(text)
