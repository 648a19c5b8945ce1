"""The tuner's pick re-checked: each trial is timed once, alone, for a second or so, and on
a shared machine that ranks the moments the trials ran in (an INT8 static variant 1.36x
ahead of the pick lost a 3-s trial by 7%; a YOLOv8n's FP32 won a quiet moment). The best
few feasible trials are opened together in one process of their own and timed in
interleaved rounds (engine/measure/interleave.py); the pick is the one that separates
from the rest, a tie going to the better trial. The trials stay as they ran (the fronts,
the plot); only the pick comes from here."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.config import RunConfig
from engine.events import Event, Notice, Progress
from engine.measure.interleave import Ranking, Timed, honest_clock, rank
from engine.model.workload import Workload

TOP = 3  # the best feasible trials re-checked
WINDOW_S = 0.5  # each candidate's turn per round
RECHECK_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class RecheckRequest:
    """The configs to time side by side, best trial first (a tie goes to it), each on the
    workload's model and inputs."""

    workload: Workload
    configs: tuple[RunConfig, ...]
    labels: tuple[str, ...]
    objective: str  # p50 | p99 | throughput
    window_s: float = WINDOW_S
    seed: int = 0


def _statistic(objective: str) -> Callable[[list[float]], float]:
    """Per round: the median call for p50, the 99th percentile for p99 (a round's window
    holds tens of calls: near its slowest), the mean for throughput (samples per second is
    the mean time per sample turned over)."""
    if objective == "p99":
        return lambda v: float(np.percentile(v, 99))
    if objective == "throughput":
        return statistics.fmean
    return statistics.median


def recheck_job(req: RecheckRequest) -> Generator[Event, None, dict[str, Any]]:
    """Open every config (variants come from the cache the trials filled), time them in
    interleaved rounds, return the Ranking's JSON with `pick_index`."""
    from engine import backends
    from engine.run.bench import BenchRequest
    from engine.run.timing import TimingPlan

    prepared: list[Any] = []
    try:
        for config, label in zip(req.configs, req.labels, strict=True):
            yield Progress("tune", len(prepared), len(req.configs), f"re-check: opening {label}")
            work = req.workload.with_config(config)
            bench = BenchRequest(work, seed=req.seed, timing=TimingPlan(), check_accuracy=False)
            prepared.append((yield from backends.backend_for(config).prepare(bench)))
        per_sample = req.objective == "throughput"
        cands = [
            Timed(label, p.run_once, float(p.batch) if per_sample else 1.0)
            for p, label in zip(prepared, req.labels, strict=True)
        ]
        clock, why = honest_clock(
            [p.config.threads for p in prepared], [p.config.spinning for p in prepared]
        )
        ranking = rank(cands, window_s=req.window_s, clock=clock,
                       statistic=_statistic(req.objective))  # fmt: skip
        while True:
            try:
                line = next(ranking)
            except StopIteration as stop:
                result: Ranking = stop.value
                break
            yield Progress("tune", 0, None, f"re-check of the best {len(cands)}: {line}")
    finally:
        for p in prepared:
            p.close()
    out = result.to_json()
    out["pick_index"] = result.pick
    out["clock_why"] = why
    out["objective"] = req.objective
    out["per"] = "sample" if per_sample else "inference"
    return out


Recheck = Callable[[RecheckRequest], Generator[Event, None, dict[str, Any] | None]]


def isolated_recheck(req: RecheckRequest) -> Generator[Event, None, dict[str, Any] | None]:
    """`recheck_job` in a process of its own (a crash there is the re-check's, not the
    tune's); None, with a warning, when it does not finish."""
    from engine.run.isolated import run_isolated
    from engine.run.job_start import IF_WARM

    yield Progress("tune", 0, None, f"re-checking the best {len(req.configs)} trials side by "
                   "side (interleaved rounds)")  # fmt: skip
    # forked from the fork server the trials started (engine/tune/trial.py), if they did
    ended = run_isolated(recheck_job, (req,), RECHECK_TIMEOUT_S, start=IF_WARM)
    if ended.status != "done":
        why = ended.error or ended.status
        yield Notice("warning", f"the re-check of the best trials did not finish ({why}); "
                     "the pick is the best trial by its own timing")  # fmt: skip
        return None
    out: dict[str, Any] = ended.result
    return out
