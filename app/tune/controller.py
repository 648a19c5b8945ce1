"""Runs a tune from the Tune dock as a job in the engine host (app/host/job_runner.py; each
trial its own isolated job, recorded in the window's session) on the desk's workload (its
config the base, its inputs every trial's), with live timing paused; trials reach the dock
as they end; double-clicking one applies its config to the running engine."""

from __future__ import annotations

import math
import shlex
from typing import Any

from PySide6.QtCore import QObject

from app.desk import Desk
from app.tune.port import TuneViewPort
from engine.api import (
    Goal,
    JobInputs,
    OpScopeError,
    Progress,
    Trial,
    TuneRequest,
    TuneResult,
    Workload,
    bench_argv,
    front,
    parse_space,
)

CONCERN = "tune"


class TuneController(QObject):
    def __init__(self, desk: Desk, view: TuneViewPort) -> None:
        super().__init__()
        self.desk, self.view = desk, view
        self.trials: list[Trial] = []
        self.goal = Goal("p50", 0.99)
        self.model = ""
        self.inputs = JobInputs()  # every trial's inputs: the shapes and data on screen
        self._begun = False  # a tune was started (not refused before it began)
        view.start_requested.connect(self.start)
        view.cancel_requested.connect(lambda: desk.jobs.cancel(CONCERN))
        view.trial_chosen.connect(self.apply_trial)

    @property
    def running(self) -> bool:
        return bool(self.desk.jobs.busy(CONCERN))

    def start(self) -> None:
        if self.running:
            return
        try:
            space = parse_space(self.view.space_items())
        except OpScopeError as exc:
            self._error(str(exc))
            return
        self.desk.run_on_workload(  # the trials get the cores: live timing pauses
            CONCERN,
            lambda workload: self._begin(workload, space),
            on_done=self._finished,
            on_failed=self._failed,
            on_events=self._events,
            on_cancelled=lambda: self._finished(None),
            pause="paused: tuning",
        )

    def _begin(self, workload: Workload, space: dict[str, list[Any]]) -> TuneRequest:
        """The tune of `space` on the workload that runs: its config the base (and its Min
        cosine the floor), its model and inputs every trial's."""
        base = workload.config
        self.goal = Goal(self.view.objective_key(), base.min_cosine)
        self.model, self.inputs = workload.model, workload.inputs  # the best one's command
        self.trials = []
        self._begun = True
        self.view.clear()
        self.view.set_floor(base.min_cosine)
        self.view.set_running(True)
        self.view.set_summary("tuning: live timing is paused")
        return TuneRequest(
            workload,
            space,
            self.goal,
            budget=self.view.budget_trials(),
            duration_s=self.view.trial_seconds(),
            session=self.desk.session_path,
        )

    def _events(self, batch: list[Any]) -> None:
        for item in batch:
            if isinstance(item, Trial):
                self._trial(item)
            elif isinstance(item, Progress):
                self.view.show_progress(item.done, item.total or 0, item.message)

    def apply_trial(self, number: int) -> None:
        trial = next((t for t in self.trials if t.number == number), None)
        if trial is None or trial.status != "ok":
            return
        self.desk.apply_config(trial.config)  # shown, run live, timing resumed

    # -- results --------------------------------------------------------------------------
    def _trial(self, t: Trial) -> None:
        self.trials.append(t)
        ok = t.status == "ok"
        self.view.add_trial(
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
        self.view.set_trials([(t.number, t.p50_ms, t.cosine) for t in ok], on_front, best)

    def _finished(self, result: TuneResult | None) -> None:
        self._end()
        if result is None:
            self.view.set_summary(
                f"cancelled after {len(self.trials)} trial(s); they are in the session"
            )
            return
        best = result.best
        if best is None:
            self.view.set_summary(
                f"{len(result.trials)} trials ({result.searched}); none meets the floor"
            )
            return
        argv = bench_argv(self.model, best.config, self.inputs.argv())
        command = shlex.join(["opscope", *argv])
        # the pick comes from the best trials re-checked side by side: the plot's star too
        picked = f"\n{result.pick['line']}" if result.pick and result.pick.get("line") else ""
        self.view.set_trials(
            [(t.number, t.p50_ms, t.cosine) for t in self.trials if t.status == "ok"],
            result.pareto_latency_accuracy,
            best.number,
        )
        self.view.set_summary(
            f"{len(result.trials)} trials ({result.searched}); best: trial {best.number}, "
            f"{best.config.short_label()}, p50 {best.p50_ms:.3f} ms, {best.samples_per_s:.1f} "
            f"samples/s, cosine {best.cosine:.5f}. Double-click it to run it live.{picked}"
            f"\n{command}"
        )

    def _failed(self, message: str) -> None:
        """The tune failed, or was refused before it began (no model: the banner only)."""
        if self._begun:
            self._end()
            self.view.set_summary(f"tune failed: {message}")
        self._error(message)

    def _error(self, message: str) -> None:
        self.desk.notify("error", f"tune failed: {message}.", key="error:tune")

    def _end(self) -> None:
        """The tune's end (live timing resumes with it: the desk's recipe)."""
        self._begun = False
        self.view.set_running(False)
        self._draw()
