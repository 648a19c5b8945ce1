"""A sweep as a job (engine/run/jobs.py): the model timed and profiled at each size of one
dim, each point recorded in the session as it ends, the sweep stored as a whole at the end,
or, interrupted, with the points done marked partial. `opscope sweep` and the window's
Scaling dock both run this."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Generator
from typing import Any, ClassVar

from engine import backends, interrupt
from engine.events import Event, Notice, Progress
from engine.model.workload import Workload
from engine.run.bench import BenchRequest
from engine.run.timing import TimingPlan
from engine.session.origins import sweep_origin
from engine.session.recorder import Recorder
from engine.session.recording import recorder_at
from engine.tune.sweep import SweepPoint, SweepResult, result_of, sweep

POINT_S = 2.0  # seconds of timing per point
PROFILE_RUNS = 10  # profiled inferences per point


@dataclasses.dataclass(frozen=True)
class SweepRequest:
    bench: BenchRequest  # the workload and timing every point starts from
    dim: str
    values: tuple[str, ...]
    session: str | None = None  # where the points and the sweep are recorded
    job_name: ClassVar[str] = "sweep"

    @classmethod
    def of(
        cls,
        workload: Workload,
        dim: str,
        values: list[str],
        session: str | None = None,
        duration_s: float = POINT_S,
        profile_runs: int = PROFILE_RUNS,
        seed: int = 0,
    ) -> SweepRequest:
        """A sweep of `workload` over `dim`'s `values`, every point timed `duration_s` after
        its warm-up and profiled over `profile_runs` inferences (the CLI's and the window's
        one way to ask for one)."""
        timing = TimingPlan(warmup_runs=5, warmup_s=0.2, min_runs=20, duration_s=duration_s)
        # labels stay out: a sweep point checks no accuracy
        work = workload.with_inputs(dataclasses.replace(workload.inputs, labels_npy=None))
        bench = BenchRequest(work, seed=seed, timing=timing, profile_runs=profile_runs)
        return cls(bench, dim, tuple(values), session)


@dataclasses.dataclass(frozen=True)
class SweepStored:
    """The sweep's row in the session: `partial` when interrupted (the points done)."""

    sweep_id: int
    partial: bool
    points: int
    of: int


def sweep_job(req: SweepRequest) -> Generator[Event | SweepPoint | SweepStored, None, SweepResult]:
    """Progress, notices and points as they end (each point's run is recorded here, its raw
    samples not passed on), `SweepStored`, then the fitted result."""
    model = req.bench.workload.model
    _, info = backends.describe_model(model)
    points: list[SweepPoint] = []
    run_ids: list[int] = []
    with recorder_at(req.session, model_path=model, kind="profile") as rec:
        _next_point(rec, req, 0)
        gen = sweep(req.bench, info, req.dim, list(req.values))
        try:
            while True:
                try:
                    item = next(gen)
                except StopIteration as stop:
                    result: SweepResult = stop.value
                    break
                if isinstance(item, SweepPoint):
                    points.append(item)
                    if rec is not None and rec.settle() and rec.run_id is not None:
                        run_ids.append(rec.run_id)  # written, so its id is the file's
                    _next_point(rec, req, len(points))
                    yield item
                    continue
                if rec is not None:
                    rec.feed(item)
                if isinstance(item, Progress | Notice):  # a point's raw samples stay here:
                    yield item  # recorded, not shipped to the driver (the window's pipe)
        except KeyboardInterrupt:  # Ctrl+C, or SIGTERM in a job's own process
            gen.close()
            stored = _keep_partial(rec, req, points, run_ids)
            if stored is not None:
                yield stored
            raise
        except GeneratorExit:  # the driver stopped (its own interruption)
            gen.close()
            _keep_partial(rec, req, points, run_ids)
            if rec is not None:
                with contextlib.suppress(Exception):
                    rec.cancel(interrupt.reason())
            raise
        if rec is not None:
            sweep_id = _store(rec, req, result, run_ids, partial=False)
            yield SweepStored(sweep_id, False, len(points), len(req.values))
    return result


def _next_point(rec: Recorder | None, req: SweepRequest, done: int) -> None:
    """The next point's run is recorded as this sweep's ("sweep 1, batch=4" in every run
    list): its dim and value, with the run's row."""
    if rec is not None and done < len(req.values):
        rec.origin = sweep_origin(req.dim, req.values[done])


def _keep_partial(
    rec: Recorder | None, req: SweepRequest, points: list[SweepPoint], run_ids: list[int]
) -> SweepStored | None:
    """The points done, stored as a partial sweep (None: nothing to store)."""
    if rec is None or not points:
        return None
    sweep_id = _store(rec, req, result_of(req.dim, points), run_ids, partial=True)
    return SweepStored(sweep_id, True, len(points), len(req.values))


def _store(
    rec: Recorder, req: SweepRequest, result: SweepResult, run_ids: list[int], partial: bool
) -> int:
    rec.settle()
    config: dict[str, Any] = req.bench.workload.config.to_json()
    return rec.store.add_sweep(
        model_path=req.bench.workload.model,
        dim=result.dim,
        config=config,
        result=result.to_json(),
        run_ids=run_ids,
        partial=partial,
    )
