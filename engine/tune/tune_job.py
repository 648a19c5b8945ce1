"""A tune as a job (engine/run/jobs.py): configs searched for the best that meets the goal,
each trial its own isolated job (engine/tune/trial.py) recorded in the session. `opscope
tune` (local trials) and the window's Tune dock run this; trials reach the driver as they
end, and an interruption stops the trial running (its run marked cancelled)."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from engine.config import RunConfig
from engine.events import Event
from engine.run.job_inputs import JobInputs
from engine.tune.search import Goal, TuneResult, tune
from engine.tune.trial import Trial, run_trial


@dataclass(frozen=True)
class TuneRequest:
    local_files: ClassVar[tuple[str, ...]] = ("model",)  # and its inputs' data files
    model: str
    space: dict[str, list[Any]]  # knob -> values (engine.tune.space.parse_space)
    base: RunConfig
    goal: Goal
    budget: int | None = None  # None: every config, in order
    duration_s: float = 1.0  # each trial's timing
    inputs: JobInputs = field(default_factory=JobInputs)  # every trial's shapes and data
    session: str | None = None  # where each trial's run is recorded
    seed: int = 0
    job_name: ClassVar[str] = "tune"


def tune_job(req: TuneRequest) -> Generator[Event | Trial, None, TuneResult]:
    """Progress and each trial as it ends; then the result."""

    def run(number: int, config: RunConfig) -> Trial:
        return run_trial(number, req.model, config, req.inputs, req.duration_s, req.session)

    result = yield from tune(req.space, req.base, req.goal, run, req.budget, req.seed)
    return result
