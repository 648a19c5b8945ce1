"""One trial: a bench run of one config, as a job in its own process (a crash in the engine
ends that trial only; engine/run/isolated.py's `run_isolated`), its run recorded in the
session by that process; `bench_argv` is the command that reproduces it."""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from engine.config import RunConfig
from engine.events import (
    AccuracyResult,
    Event,
    Notice,
    Progress,
    RunStarted,
    TimingDone,
    VariantReady,
)
from engine.model.workload import Workload
from engine.run.child_job import describe_exit
from engine.run.isolated import run_isolated
from engine.run.job_start import WARM
from engine.run.timing import TimingPlan

TRIAL_TIMEOUT_S = 1800.0  # a hung trial (a quantizer that never returns) ends here


@dataclass
class Trial:
    number: int
    config: RunConfig
    status: str = "pending"  # ok | failed
    p50_ms: float = math.nan
    p99_ms: float = math.nan
    samples_per_s: float = math.nan
    cosine: float = math.nan  # against FP32, worst output (1.0 for FP32 itself)
    samples: int = 0
    error: str | None = None
    wall_s: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "config": self.config.to_json(),
            "status": self.status,
            "latency_ms": {"p50": self.p50_ms, "p99": self.p99_ms, "count": self.samples},
            "throughput": {"samples_per_s": self.samples_per_s},
            "accuracy": {"cosine": self.cosine},
            "error": self.error,
            "wall_s": self.wall_s,
            **self.details,
        }

    def metric(self, name: str) -> float:
        return {
            "p50": self.p50_ms,
            "p99": self.p99_ms,
            "throughput": self.samples_per_s,
        }[name]


def bench_argv(model: str, config: RunConfig, extra: list[str]) -> list[str]:
    """The `opscope bench` command line of a config (what a user runs to reproduce it)."""
    int8 = config.precision.startswith("int8")
    target = ["--min-cosine", f"{config.min_cosine:g}"] if int8 else []
    return [
        "bench", model,
        "--engine", config.engine,
        "--precision", config.precision,
        "--fusion", config.fusion,
        "--batch", str(config.batch),
        "--threads", str(config.threads),
        "--spinning", "on" if config.spinning else "off",
        "--provider", config.provider,
        *target,
        *extra,
    ]  # fmt: skip


@dataclass(frozen=True)
class TrialRequest:
    """One trial (its workload at the trial's config), as the job in its own process
    receives it."""

    workload: Workload
    duration_s: float
    session: str | None
    timing: TimingPlan | None = None  # None: TimingPlan(duration_s=duration_s)
    seed: int = 0  # for generated inputs
    accuracy: bool = True  # checked against FP32 (a gate's candidates skip it)
    # who makes the run, recorded with it (engine/session/origins.py: a tune's trial);
    # None: a bench run as any other
    origin: dict[str, Any] | None = None


def trial_job(req: TrialRequest) -> Generator[Event, None, dict[str, Any]]:
    """The trial's bench run (recorded in `req.session`, with telemetry, as `opscope bench
    --session` records one); yields its progress and notices, returns its figures."""
    from engine.run.bench import BenchRequest, run_bench
    from engine.run.cli_telemetry import RunTelemetry
    from engine.session.recording import recording

    timing = req.timing or TimingPlan(duration_s=req.duration_s)
    bench = BenchRequest(req.workload, seed=req.seed, timing=timing, check_accuracy=req.accuracy)
    work = req.workload
    figures: dict[str, Any] = {}
    with recording(
        req.session, model_path=work.model, config=work.config, kind="bench", origin=req.origin
    ) as record:
        events = run_bench(bench)
        if req.session:
            events = RunTelemetry().interleave(events)
        for ev in events:
            record(ev)
            if isinstance(ev, Progress | Notice):
                yield ev
            elif isinstance(ev, TimingDone):
                figures["latency_ms"] = ev.latency.to_json()
                figures["samples_per_s"] = ev.throughput.samples_per_s
                if ev.contention is not None:  # how busy the machine was while it ran
                    figures["contention"] = ev.contention.to_json()
            elif isinstance(ev, AccuracyResult):
                figures["cosine"] = ev.cosine
            elif isinstance(ev, RunStarted):
                figures["provider_used"] = ev.provider_used
            elif isinstance(ev, VariantReady):
                int8 = ev.details.get("int8") or {}
                figures["excluded_nodes"] = int8.get("excluded_nodes") or []
    return figures


def run_trial(
    number: int,
    workload: Workload,
    duration_s: float,
    session: str | None,
    timeout_s: float = TRIAL_TIMEOUT_S,
    origin: dict[str, Any] | None = None,
    start: str = WARM,
) -> Trial:
    """Run the trial (the workload at the trial's config) to its end, as a job in its own
    process (a crash in the engine ends that trial only); a failure (bad config, crash,
    timeout) is a failed trial. `origin`: its run's, as recorded (the tune's trial).
    `start`: how its process starts (engine/run/job_start.py); a tune runs many trials,
    so each is forked from the warm fork server, started at the first (its start costs
    about what one spawned trial's does: bench/results/job_start_cost.md)."""
    import time

    config = workload.config
    trial = Trial(number, config)
    t0 = time.perf_counter()
    req = TrialRequest(workload, duration_s, session, origin=origin)
    try:
        ended = run_isolated(trial_job, (req,), timeout_s, start=start)
    finally:
        trial.wall_s = time.perf_counter() - t0
    if ended.status != "done":
        why = {
            "timeout": f"no result after {timeout_s:g} s",
            "failed": ended.error,
            "cancelled": "cancelled",
            "crashed": describe_exit(ended.exitcode, "the trial's engine"),
        }[ended.status]
        trial.status, trial.error = "failed", " ".join(why.split())[:300]
        return trial
    data: dict[str, Any] = ended.result
    lat = data.get("latency_ms") or {}
    trial.status = "ok"
    trial.p50_ms = float(lat.get("p50", math.nan))
    trial.p99_ms = float(lat.get("p99", math.nan))
    trial.samples = int(lat.get("count", 0))
    trial.samples_per_s = float(data.get("samples_per_s", math.nan))
    trial.cosine = 1.0 if config.precision == "fp32" else float(data.get("cosine", math.nan))
    if data.get("excluded_nodes"):
        trial.details["excluded_nodes"] = data["excluded_nodes"]
    trial.details["provider_used"] = data.get("provider_used")
    if data.get("contention"):
        trial.details["machine"] = {"contention": data["contention"]}
    return trial


def trial_busy(t: Trial) -> str | None:
    """The trial's contention line when the machine was busy while it ran, else None."""
    c = (t.details.get("machine") or {}).get("contention") or {}
    return str(c.get("line")) if c.get("verdict") == "busy" else None
