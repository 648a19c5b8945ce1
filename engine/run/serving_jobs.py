"""Serving a loaded model: a load run (the real serving loop under open-loop or closed-loop
traffic, a run of kind load) and the calibration the What-if view simulates from.

Both are jobs (engine/run/jobs.py) of the kind that takes a loaded model besides its
request: the engine host runs them on a thread of its own, on the model the window shows,
live timing paused (engine/run/host_jobs.py); `opscope load` runs the same load job on the
model it prepared. Their events are a run's (the session records the load run, the window
draws it). Cancel is "stop sending" (`LoadedModel.stop`): what was sent is served and the
run is recorded, cancelled."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, ClassVar

from engine import backends, interrupt
from engine.backends.base import Prepared, PrepareRequest
from engine.events import Event, Marker, ModelLoaded, Notice, Progress, RunEnded
from engine.serve.batching import BatchPolicy
from engine.serve.loop import ServingLoop, drain_deadline
from engine.serve.setup import prepare_serving
from engine.serve.sim.calibration import calibration_context, load_or_calibrate
from engine.serve.sim.service import ServiceModel
from engine.serve.summary import describe_setup, served
from engine.serve.traffic.plan import plan_traffic
from engine.serve.traffic.schedule import Schedule, TrafficSpec


@dataclass(frozen=True)
class LoadRunRequest:
    """Serve the loaded model under `traffic` (a spec: poisson:RATE, bursts:..., closed:N)
    with `batching` (`BatchPolicy.to_json()`); a run of kind load."""

    local_files: ClassVar[tuple[str, ...]] = ("traffic",)  # trace:FILE
    traffic: str
    batching: dict[str, Any]
    duration_s: float = 10.0
    cache: int = 0
    repeat: float = 0.0  # the share of requests that repeat an earlier one (the cache's)
    warmup_s: float = 1.0
    seed: int = 0
    requests: int | None = None  # open loop: this many requests, whatever the duration
    closed_requests: int = 0  # closed loop: requests per client
    slo_ms: float | None = None  # the p99 target: goodput counts the requests within it
    job_name: ClassVar[str] = "load run"


@dataclass(frozen=True)
class CalibrateRequest:
    """Time batches up to `max_batch` with `instances` running at once, for the What-if
    simulator (cached per model, config and machine); the result is the ServiceModel's
    JSON."""

    max_batch: int
    instances: int = 1
    remeasure: bool = False  # measure again even when a calibration is cached
    job_name: ClassVar[str] = "calibration"


class LoadedModel:
    """The model a serving job serves, one sample per request: the engine host's running
    config (prepared again at batch 1 when its batch is larger, by `request`), or the one
    `opscope load` prepared. `facts` open the job's run (ModelLoaded, VariantReady,
    RunStarted...); `emit` hears the batch-1 preparation's progress."""

    def __init__(
        self,
        prepared: Prepared,
        model_path: str,
        facts: list[Event] | None = None,
        request: PrepareRequest | None = None,
        emit: Callable[[Event], None] = lambda ev: None,
    ) -> None:
        self.prepared, self.model_path = prepared, model_path
        self.facts = list(facts or [])
        self.request, self.emit = request, emit
        self.stopping = threading.Event()
        self.loop: ServingLoop | None = None  # the load run's, once it serves
        self._own: Prepared | None = None

    def stop(self) -> None:
        """Cancel: stop sending; what was sent is served, the run recorded cancelled."""
        self.stopping.set()
        if self.loop is not None:
            self.loop.stop.set()

    def abort(self) -> None:
        """Stop now (the host is closing): what still waits is not served, and the loop's
        threads are out of the engine when the job ends."""
        self.stopping.set()
        if self.loop is not None:
            self.loop.cancel()

    def batch1(self) -> Prepared:
        """The model with one sample per request."""
        if self.prepared.batch == 1 or self.request is None:
            return self.prepared
        if self._own is None:
            self.emit(Notice("info", "serving prepares the model at batch 1: one request is "
                             "one sample; batching is the Traffic dock's max batch"))  # fmt: skip
            config = dataclasses.replace(self.prepared.config, batch=1)
            work = self.request.workload.with_config(config)
            req = dataclasses.replace(self.request, workload=work)
            self._own = backends.prepare(req, self._progress_only)
        return self._own

    def _progress_only(self, ev: Event) -> None:
        """Preparing batch 1 is a step of this job, not a run: its facts stay here."""
        if isinstance(ev, Progress | Notice):
            self.emit(ev)

    def close(self) -> None:
        if self._own is not None:
            self._own.close()
            self._own = None

    @property
    def sha256(self) -> str:
        model = next((ev for ev in self.facts if isinstance(ev, ModelLoaded)), None)
        return model.info.sha256 if model is not None else ""


def load_run_job(
    req: LoadRunRequest, model: LoadedModel
) -> Generator[Event, None, dict[str, Any] | None]:
    """The load run: its facts, ServingStarted, every request and batch as they end,
    ServingSummary, RunEnded; returns the figures with the set-up (None when stopped
    before it served)."""
    spec, schedule = load_schedule(req)
    policy = BatchPolicy.from_json(req.batching)
    serving = prepare_serving(model.batch1(), policy, model.model_path)
    if model.stopping.is_set():
        return None
    setup = describe_setup(
        spec, serving.policy, seed=req.seed, duration_s=req.duration_s, cache=req.cache,
        repeat=req.repeat,
    )  # fmt: skip
    yield from model.facts  # the run's facts: same model, config and provider
    yield from serving.notices
    if schedule.note:
        yield Notice("info", schedule.note)
    yield Marker("load", f"load {spec.text}, {serving.policy.describe()}", time.perf_counter_ns())
    model.loop = loop = ServingLoop(
        serving.run_batch, serving.request_feeds, schedule, serving.policy,
        cache_size=req.cache,
        closed_clients=spec.clients if spec.closed else 0,
        closed_requests=req.closed_requests if spec.closed else 0,
        warmup_s=req.warmup_s,
        deadline_s=None if spec.closed else drain_deadline(schedule.times),
    )  # fmt: skip
    if model.stopping.is_set():
        loop.cancel()
    try:
        figures = yield from served(loop, setup, req.warmup_s, req.slo_ms)
    except Exception as exc:
        yield RunEnded("error", str(exc))
        raise
    if loop.interrupted:  # a signal (opscope load's Ctrl+C)
        yield RunEnded("cancelled", interrupt.reason())
    elif model.stopping.is_set():
        yield RunEnded("cancelled", "stopped by the user")
    else:
        yield RunEnded("ok")
    return figures


def load_schedule(req: LoadRunRequest, repeat_name: str = "repeat") -> tuple[TrafficSpec, Schedule]:
    """The load run's traffic and the schedule it serves, planned here only: the job serves
    this, and `opscope load` checks its flags and fits the warm-up on it, from the request
    it sends the job, before it sends it. An open loop serves in real time: what is due
    past the duration (the first N requests of a trace can span centuries) is cut, said in
    the schedule's note, before anything waits."""
    spec, schedule = plan_traffic(
        req.traffic, req.duration_s, req.seed, req.repeat, req.requests, req.closed_requests,
        repeat_name,
    )  # fmt: skip
    if not spec.closed:
        schedule = schedule.within(req.duration_s, f"traffic {spec.text}")
    return spec, schedule


def calibrate_job(
    req: CalibrateRequest, model: LoadedModel
) -> Generator[Event, None, dict[str, Any] | None]:
    """The calibration (or the cached one): returns `ServiceModel.to_json()`, None when
    stopped (Cancel: it stops between two batches; nothing half-measured is cached)."""
    prepared = model.batch1()
    policy = BatchPolicy(max_batch=req.max_batch, instances=req.instances)
    # the calibration warms each size it times: not every size up to the max here (for 32,
    # 528 samples, 40% of a MiniLM calibration)
    serving = prepare_serving(prepared, policy, model.model_path, warm_all=False)
    context = calibration_context(
        model.sha256,
        prepared.config.to_json(),
        prepared.provider_used,
        serving.policy.max_batch,
        req.instances,
    )
    for item in load_or_calibrate(serving, context, req.remeasure, model.stopping.is_set):
        if isinstance(item, ServiceModel):
            return item.to_json()
        yield item
        if model.stopping.is_set():
            return None
    return None
