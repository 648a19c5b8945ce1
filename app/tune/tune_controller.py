"""Runs a tune from the Tune dock as a job in the engine host (app/host/job_runner.py; each
trial its own isolated job, recorded in the window's session), with live timing paused;
trials reach the dock as they end; double-clicking one applies its config to the running
engine."""

from __future__ import annotations

import math
import shlex
from typing import Any

from PySide6.QtCore import QObject

from app.tune.tune_dock import TuneDock
from engine.api import (
    Goal,
    JobInputs,
    OpScopeError,
    Progress,
    RunConfig,
    Trial,
    TuneRequest,
    TuneResult,
    bench_argv,
    front,
    parse_space,
)

CONCERN = "tune"


class TuneController(QObject):
    def __init__(self, dock: TuneDock, workbench: Any) -> None:
        super().__init__()
        self.dock, self.wb = dock, workbench
        self.trials: list[Trial] = []
        self.goal = Goal("p50", 0.99)
        self.model = ""
        self.inputs = JobInputs()  # every trial's inputs: the shapes and data on screen
        dock.start_requested.connect(self.start)
        dock.cancel_requested.connect(lambda: self.wb.jobs.cancel(CONCERN))
        dock.trial_chosen.connect(self.apply_trial)

    @property
    def running(self) -> bool:
        return bool(self.wb.jobs.busy(CONCERN))

    def start(self) -> None:
        window = self.wb.window
        load = self.wb.client.last_load
        if not load:
            window.show_error("tune", "load a model first")
            return
        if self.running:
            return
        try:
            space = parse_space(self.dock.space_items())
        except OpScopeError as exc:
            window.show_error("tune", str(exc))
            return
        base: RunConfig = window.config_panel.config()
        self.goal = Goal(self.dock.objective.currentData(), base.min_cosine)
        self.model = load[0]
        self.trials = []
        self.dock.clear()
        self.dock.plot.set_floor(base.min_cosine)
        self.dock.set_running(True)
        self.dock.summary.setText("tuning: live timing is paused")
        self.wb.pause_for(CONCERN, "paused: tuning")  # the trials get the cores
        self.wb.recording.flush()
        self.inputs = self.wb.client.job_inputs()  # the shapes and data on screen
        request = TuneRequest(
            model=self.model,
            space=space,
            base=base,
            goal=self.goal,
            budget=self.dock.budget.value() or None,
            duration_s=self.dock.duration.value(),
            inputs=self.inputs,
            session=str(self.wb.recording.path),
        )
        self.wb.jobs.start(
            CONCERN,
            request,
            on_done=self._finished,
            on_failed=self._failed,
            on_events=self._events,
            on_cancelled=lambda: self._finished(None),
        )

    def _events(self, batch: list[Any]) -> None:
        for item in batch:
            if isinstance(item, Trial):
                self._trial(item)
            elif isinstance(item, Progress):
                self.dock.show_progress(item.done, item.total or 0, item.message)

    def apply_trial(self, number: int) -> None:
        trial = next((t for t in self.trials if t.number == number), None)
        if trial is None or trial.status != "ok":
            return
        panel = self.wb.window.config_panel
        panel.set_config(trial.config)
        self.wb.controller.apply(trial.config)
        if not self.wb.running:
            self.wb.toggle_running()

    # -- results --------------------------------------------------------------------------
    def _trial(self, t: Trial) -> None:
        self.trials.append(t)
        ok = t.status == "ok"
        self.dock.add_trial(
            {
                "#": t.number,
                "config": t.config.short_label(),
                "p50 ms": f"{t.p50_ms:.3f}" if ok else "",
                "p99 ms": f"{t.p99_ms:.3f}" if ok else "",
                "samples/s": f"{t.samples_per_s:.1f}" if ok else "",
                "cosine": f"{t.cosine:.5f}" if ok and math.isfinite(t.cosine) else "",
                "status": ("ok" if self.goal.feasible(t) else "below the floor") if ok
                else f"failed: {t.error}",
            }
        )  # fmt: skip
        self._draw()

    def _draw(self) -> None:
        ok = [t for t in self.trials if t.status == "ok"]
        on_front = [ok[i].number for i in front([(t.p50_ms, t.cosine) for t in ok], [False, True])]
        feasible = [t for t in ok if self.goal.feasible(t)]
        best = min(feasible, key=self.goal.loss).number if feasible else None
        self.dock.plot.set_trials([(t.number, t.p50_ms, t.cosine) for t in ok], on_front, best)

    def _finished(self, result: TuneResult | None) -> None:
        self._end()
        if result is None:
            self.dock.summary.setText(
                f"cancelled after {len(self.trials)} trial(s); they are in the session"
            )
            return
        best = result.best
        if best is None:
            self.dock.summary.setText(
                f"{len(result.trials)} trials ({result.searched}); none meets the floor"
            )
            return
        argv = bench_argv(self.model, best.config, self.inputs.argv())
        command = shlex.join(["opscope", *argv])
        # the pick comes from the best trials re-checked side by side: the plot's star too
        picked = f"\n{result.pick['line']}" if result.pick and result.pick.get("line") else ""
        self.dock.plot.set_trials(
            [(t.number, t.p50_ms, t.cosine) for t in self.trials if t.status == "ok"],
            result.pareto_latency_accuracy,
            best.number,
        )
        self.dock.summary.setText(
            f"{len(result.trials)} trials ({result.searched}); best: trial {best.number}, "
            f"{best.config.short_label()}, p50 {best.p50_ms:.3f} ms, {best.samples_per_s:.1f} "
            f"samples/s, cosine {best.cosine:.5f}. Double-click it to run it live.{picked}"
            f"\n{command}"
        )

    def _failed(self, message: str) -> None:
        self._end()
        self.dock.summary.setText(f"tune failed: {message}")
        self.wb.window.show_error("tune", message)

    def _end(self) -> None:
        self.dock.set_running(False)
        self._draw()
        self.wb.resume_after(CONCERN)
