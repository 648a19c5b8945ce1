"""The LLM Serving room's controller: the studies of its view on the generating model the
host runs (the desk's workload), "Simulate all layouts" (calibration, cached, then the
simulator) and "Run for real" (the real serving loop, with the simulator's answer for that
layout beside it), each a job the engine host runs in a process of its own
(app/host/job_runner.py) through the desk's recipe (`run_on_workload`), with live timing
paused meanwhile so that neither fights the live run for the cores; Cancel stops it as
Ctrl+C would. Bad values are refused in one line before any work starts."""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import QObject, QTimer

from app.desk import Desk
from app.llm_serving.port import DockFrame, LLMServingViewPort
from engine.api import (
    LLMPlan,
    LLMStudyRequest,
    ModelInfo,
    Notice,
    OpScopeError,
    Progress,
    Workload,
    check_real_layout,
    genai_folder,
    llm_serving_config,
    plan_layouts,
    read_config,
    real_plan,
)
from widgets.models.llm_serving_form import LENGTH_NAMES, checked_plan
from widgets.models.llm_serving_table import LLMServingTable

CONCERN = "llm-serving"
PAUSE = "paused: LLM serving"  # the mark on the live plot while a study has the cores
LIVE_MS = 500  # Live: a simulation this long after the last change of a setting
REMEDY = "the Measure again button"  # how the dock's user measures the calibration again


class LLMServingController(QObject):
    """`view` is the room's view, `frame` its dock (shown while a generating model runs)."""

    def __init__(self, desk: Desk, view: LLMServingViewPort, frame: DockFrame) -> None:
        super().__init__()
        self.desk, self.view, self.frame = desk, view, frame
        self.table = LLMServingTable()
        self.model: str | None = None  # the generating model's folder
        self.context = 0
        self.kind = ""  # "simulate" | "real" while a job runs
        self.plan: LLMPlan | None = None
        self.t0 = 0.0
        self.warnings: list[str] = []  # the job's warnings, repeated in its last line
        self.cancelling = False  # Cancel was pressed for the study running
        self.stage = ""  # the stage of the running study's last progress ("calibration", ...)
        self.notes: list[str] = []
        self.live_timer = QTimer(self)
        self.live_timer.setSingleShot(True)
        self.live_timer.setInterval(LIVE_MS)
        self.live_timer.timeout.connect(self._live_simulate)
        self.live_pending = False  # Live: settings changed while a study ran
        # what the last simulation that ended studied (model, serving config, plan): Live
        # does not study it again (the Simulate button does: the user asks)
        self.last_study: tuple[Any, ...] | None = None
        self._studying: tuple[Any, ...] | None = None
        view.settings_changed.connect(self._settings_changed)
        view.live_toggled.connect(self._live_toggled)
        view.simulate_requested.connect(self.simulate)
        view.remeasure_requested.connect(self.measure_again)
        view.real_requested.connect(self.run_real)
        view.cancel_requested.connect(self.cancel)
        desk.model_loaded.connect(self.model_loaded)
        self._show_table()  # each layout waiting for a study

    @property
    def busy(self) -> bool:
        """A study is running."""
        return bool(self.desk.jobs.busy(CONCERN))

    # the loaded model -------------------------------------------------------------------
    def model_loaded(self, info: ModelInfo) -> None:
        """The host loaded a model: the workload's (its path on this machine)."""
        workload = self.desk.workload
        self.model_changed(workload.model if workload is not None else info.path)

    def model_changed(self, path: str | None) -> None:
        """A generating model shows the dock (raised, the first time it is loaded); any
        other model hides it."""
        folder = genai_folder(path) if path else None
        try:
            context = read_config(folder).context_length if folder is not None else 0
        except OpScopeError:
            folder = None
        if folder is None:
            self.model = None
            self.frame.hide()
            if not self.busy:
                self.view.set_status("open a generating model (a genai folder) to compare layouts")
            return
        if str(folder) == self.model:
            return
        self.model, self.context = str(folder), context
        self.table.clear()
        self._show_table()
        if not self.busy:
            self.view.set_status(
                f"{folder.name}: context {context} tokens, served in the Configuration "
                "panel's precision (FP32, FP16, INT8 or INT4 weights). Simulate the three "
                "layouts, then run one for real to see how they agree"
            )
        self.frame.show()
        self.frame.raise_()

    # commands ---------------------------------------------------------------------------
    def simulate(self) -> None:
        self._start("simulate")

    def measure_again(self) -> None:
        """Measure the calibration anew (the kept one is set aside), then simulate."""
        self._start("simulate", remeasure=True)

    def run_real(self) -> None:
        self._start("real")

    # Live: simulate again as settings change ----------------------------------------------
    def _settings_changed(self) -> None:
        if self.view.live_on():
            self.live_timer.start()  # restarted by every change: once they settle

    def _live_toggled(self, on: bool) -> None:
        self.live_pending = False
        if on:
            self.live_timer.start()
        else:
            self.live_timer.stop()

    def _live_simulate(self) -> None:
        if self.busy:  # after the study running now
            self.live_pending = True
        elif self.model is not None:
            self._start("simulate", live=True)

    def _study(self, kind: str, plan: LLMPlan) -> tuple[Any, ...]:
        """What a study studies: its kind, the model, the config it is served in (from the
        live workload) and the plan (workload and settings)."""
        live = self.desk.workload
        config = llm_serving_config(live.config) if isinstance(live, Workload) else None
        return (kind, self.model, config, plan)

    def _start(self, kind: str, remeasure: bool = False, live: bool = False) -> None:
        if self.busy:
            return
        if self.model is None:
            self.view.set_status(
                "open a generating model first (File > Demo Models > Demo LLM)", "error"
            )
            return
        form = self.view.form()
        try:
            if kind == "simulate":
                plan = checked_plan(form, self.context)
            else:
                plan = real_plan(checked_plan(form, self.context, form.real_layout))
                check_real_layout(plan_layouts(plan, self.context)[0])
        except OpScopeError as exc:
            self.view.set_status(str(exc), "error")
            return
        study = self._study(kind, plan)
        if live and study == self.last_study:  # nothing changed: the same study again
            self.view.set_status(
                "Live: the workload and settings are those of the last simulation, so it "
                "is not run (or recorded) again; Simulate runs it again"
            )
            return
        self._studying = study
        self.warnings = []
        self.kind, self.plan, self.t0 = kind, plan, time.perf_counter()
        self.cancelling = False
        self.stage = ""
        self.view.set_running(True)
        what = (
            "measuring the calibration again, then simulating"
            if remeasure
            else "calibrating (kept, and reused next time), then simulating"
            if kind == "simulate"
            else f"serving {plan.layout} for real"
        )
        self.view.show_progress(0, None, "starting")
        self.view.set_status(f"{what}: live timing is paused")
        model = self.model
        # the study gets the cores (live timing paused) and is recorded beside the live runs
        self.desk.run_on_workload(
            CONCERN,
            lambda w: self._request(w, model, kind, plan, remeasure),
            on_done=self._done,
            on_failed=self._failed,
            on_events=self._events,
            on_cancelled=self._cancelled,
            pause=PAUSE,
        )

    def _request(
        self, live: Workload, model: str, kind: str, plan: LLMPlan, remeasure: bool
    ) -> LLMStudyRequest:
        """The study of the generating model's folder `model` at the live config, fitted
        for serving (its precision when it is one a study serves, else FP32; batch 1)."""
        config = llm_serving_config(live.config)
        self.notes = [
            f"served in {config.precision}"
            if live.config.precision == config.precision
            else f"served in fp32 (the live {live.config.precision} is not one it serves)"
        ]
        return LLMStudyRequest(kind, Workload(model, config), plan, LENGTH_NAMES, remeasure,
                               session=self.desk.session_path, remedy=REMEDY)  # fmt: skip

    # the job's answers ------------------------------------------------------------------
    def _events(self, batch: list[Any]) -> None:
        for ev in batch:
            if isinstance(ev, Progress):
                self.stage = ev.stage
                self.view.show_progress(ev.done, ev.total, f"{ev.stage}: {ev.message}")
            elif isinstance(ev, Notice) and ev.level == "warning":
                self.warnings.append(ev.message)  # kept for the final line
                self.view.set_status(ev.message, "warning")
            elif isinstance(ev, Notice) and ev.level == "info":
                if ev.message.startswith("LLM calibration"):  # reused or measured: said last
                    self.notes.append(ev.message)
                self.view.set_status(ev.message)

    def cancel(self) -> None:
        """Stop the study as Ctrl+C would: a real run stops sending and ends with what it
        served (kept, and said to be cancelled); a calibration keeps the rounds it measured
        (the next continues from them); a simulation is dropped."""
        self.cancelling = True
        self.desk.jobs.cancel(CONCERN)

    def _done(self, rows: list[dict[str, Any]]) -> None:
        took = time.perf_counter() - self.t0
        if self.kind == "simulate":
            self.table.set_simulated(rows)
            if not self.cancelling:
                self.last_study = self._studying
        else:
            self.table.add(rows)
        self._end()
        self._show_table()
        n = rows[0]["requests"]["count"] if rows else 0
        head = (
            f"{self._name()} cancelled: what it served is kept"
            if self.cancelling
            else f"{'simulated' if self.kind == 'simulate' else 'served'} {n} requests "
            f"in {took:.1f} s"
        )
        parts = [head, self.table.verdict(), *self.notes, *self.warnings]
        self.view.set_status(
            " · ".join(p for p in parts if p), "warning" if self.warnings else "info"
        )

    def _failed(self, message: str) -> None:
        self._end()
        self.view.set_status(f"{self._name()} failed: {message}", "error")

    def _cancelled(self) -> None:
        self._end()
        if self.stage == "calibration":
            self.view.set_status("calibration cancelled: the rounds it measured are kept, and "
                                 "the next simulation continues from them")  # fmt: skip
        else:
            self.view.set_status(f"{self._name()} cancelled")

    def _name(self) -> str:
        return "simulation" if self.kind == "simulate" else "real run"

    def _end(self) -> None:
        """The study ended (the desk resumed live timing)."""
        self.view.set_running(False)
        if self.live_pending and self.view.live_on():
            self.live_pending = False
            self.live_timer.start()

    def _show_table(self) -> None:
        """The rows, and the SLOs they were judged by (before any: the dock's)."""
        if self.plan is not None:
            slos = (self.plan.slo_ttft_ms, self.plan.slo_tpot_ms)
        else:
            form = self.view.form()
            slos = (form.slo_ttft_ms or None, form.slo_tpot_ms or None)
        self.view.show_table(self.table, *slos)

    def shutdown(self) -> None:
        self.live_timer.stop()
        self.desk.jobs.forget(CONCERN)
