"""The Memory room's controller: Measure runs the memory job (engine/run/memory_job.py, as
`opscope memory`) through the desk on its workload (the model, config and inputs shown; a
generating model at the prompt and new tokens it runs), live timing paused meanwhile;
Cancel stops it; the report is drawn and a failure is one line. A report stays drawn for
the workload it was measured on: its header names the input shapes, and once the inputs,
the config or a generating model's lengths move away from those it is marked stale (and
fresh again when they come back)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject

from app.desk import NO_MODEL, Desk
from app.memory.port import MemoryViewPort
from engine.api import (
    MemoryRequest,
    ModelInfo,
    Notice,
    Progress,
    Workload,
    editable_dims,
    genai_folder,
)

CONCERN = "memory"


@dataclass(frozen=True)
class MeasuredFor:
    """What a memory report depends on, of a workload: the model, the inputs (dims, whole
    shapes, the data file that sizes them), the config that changes the bytes, and a
    generating model's prompt and new tokens."""

    model: str
    parts: tuple[tuple[str, str], ...]  # (what, its value in words): "sequence", "512"

    def changes(self, now: MeasuredFor) -> str:
        """The parts that differ, in words ("sequence 512 -> 128, precision fp32 -> fp16")."""
        if now.model != self.model:
            return "another model"
        was, new = dict(self.parts), dict(now.parts)
        moved = [f"{k} {was.get(k, '-')} -> {new.get(k, '-')}"
                 for k in dict.fromkeys([*was, *new]) if was.get(k) != new.get(k)]  # fmt: skip
        return ", ".join(moved)


class MemoryController(QObject):
    def __init__(self, desk: Desk, view: MemoryViewPort) -> None:
        super().__init__()
        self.desk, self.view = desk, view
        self.model: str | None = None
        self.asked: MeasuredFor | None = None  # the running job's workload
        self.shown: MeasuredFor | None = None  # the drawn report's workload
        view.measure_requested.connect(self.measure)
        view.cancel_requested.connect(lambda: desk.jobs.cancel(CONCERN))
        desk.model_loaded.connect(self.model_loaded)
        desk.workload_changed.connect(self.workload_changed)

    @property
    def running(self) -> bool:
        return bool(self.desk.jobs.busy(CONCERN))

    def model_loaded(self, info: ModelInfo) -> None:
        """Another model: the last one's report goes (timing resumed re-announces the same
        model: its report and the last word stay)."""
        if info.path == self.model or self.running:
            return
        self.model = info.path
        self.shown = None
        self.view.set_report(None)
        self.view.set_status(f"{info.name}: Measure for its memory at the shapes shown")

    def measured_for(self, workload: Workload) -> MeasuredFor:
        """What of `workload` a memory report depends on (dims at their defaults where not
        set, so that 128 set by hand is the default 128)."""
        info = self.desk.model_info
        given = workload.inputs
        dims = {d.name: str(given.dims.get(d.name, d.default))
                for d in (editable_dims(info) if info is not None else [])}  # fmt: skip
        dims.update((k, str(v)) for k, v in given.dims.items())
        parts = list(dims.items())
        parts += [(k, "x".join(map(str, v))) for k, v in sorted(given.shapes.items())]
        parts.append(("inputs file", given.inputs_npz or "none"))
        c = workload.config
        parts += [("batch", str(c.batch)), ("precision", c.precision), ("fusion", c.fusion),
                  ("engine", c.engine), ("provider", c.provider)]  # fmt: skip
        shape = self.desk.generation_shape if genai_folder(workload.model) is not None else None
        if shape:
            parts += [("prompt", str(shape[0])), ("new tokens", str(shape[1]))]
        return MeasuredFor(workload.model, tuple(parts))

    def workload_changed(self, workload: Workload | None) -> None:
        """The drawn report marked stale when the workload moved away from the one it was
        measured on (fresh again when it comes back)."""
        if self.shown is None or workload is None:
            return
        moved = self.shown.changes(self.measured_for(workload))
        self.view.set_stale(f"stale: measured for {moved}; Measure again" if moved else None)

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
        self.asked = self.measured_for(workload)
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
        self.shown = self.asked
        self.view.set_report(report)
        workload = self.desk.workload  # moved while it ran: stale at once
        self.workload_changed(workload if isinstance(workload, Workload) else None)
        self._end(f"measured on {report.get('provider_used')}, resident memory in a process "
                  "of its own; the report is in the session")  # fmt: skip

    def _failed(self, why: str) -> None:
        self._end(why if why == NO_MODEL else f"memory failed: {why}")

    def _end(self, text: str) -> None:
        self.view.set_running(False)
        self.view.set_status(text)
