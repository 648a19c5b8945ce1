"""A tune as a job (engine/run/jobs.py): configs searched for the best that meets the goal,
each trial its own isolated job (engine/tune/trial.py) recorded in the session. `opscope
tune` (local trials) and the window's Tune dock run this; trials reach the driver as they
end, and an interruption stops the trial running (its run marked cancelled)."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, ClassVar

from engine.config import RunConfig
from engine.events import Event
from engine.model.workload import Workload
from engine.session.origins import new_tune_key, tune_origin
from engine.tune.recheck import RecheckRequest, isolated_recheck
from engine.tune.search import Goal, Recheck, TuneResult, tune
from engine.tune.trial import Trial, run_trial


@dataclass(frozen=True)
class TuneRequest:
    # the workload's config is the tune's base; its inputs are every trial's shapes and data
    workload: Workload
    space: dict[str, list[Any]]  # knob -> values (engine.tune.space.parse_space)
    goal: Goal
    budget: int | None = None  # None: every config, in order
    duration_s: float = 1.0  # each trial's timing
    session: str | None = None  # where each trial's run is recorded
    seed: int = 0
    recheck: bool = True  # the best trials re-checked side by side before the pick
    job_name: ClassVar[str] = "tune"


def local_recheck(workload: Workload, seed: int = 0) -> Recheck:
    """The best trials re-checked on this machine, in a process of their own, on the
    workload's model and inputs."""

    def recheck(top: list[Trial], goal: Goal) -> Generator[Event, None, dict[str, Any] | None]:
        req = RecheckRequest(
            workload,
            tuple(t.config for t in top),
            tuple(f"trial {t.number} ({t.config.short_label()})" for t in top),
            goal.objective,
            seed=seed,
        )
        return (yield from isolated_recheck(req))

    return recheck


def tune_job(req: TuneRequest) -> Generator[Event | Trial, None, TuneResult]:
    """Progress and each trial as it ends; then the result. Each trial's run is recorded
    as this tune's (its origin: "tune 2, trial 7" in every run list)."""
    key = new_tune_key()

    def run(number: int, config: RunConfig) -> Trial:
        work = req.workload.with_config(config)
        origin = tune_origin(key, number)
        return run_trial(number, work, req.duration_s, req.session, origin=origin)

    recheck = local_recheck(req.workload) if req.recheck else None
    base = req.workload.config
    result = yield from tune(req.space, base, req.goal, run, req.budget, req.seed, recheck=recheck)
    return result
