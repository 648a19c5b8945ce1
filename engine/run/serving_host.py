"""Serving in the engine host: the app's "Run load" (the real serving loop on the loaded
model, a run of kind load) and the calibration its What-if view simulates from.

Both run on a worker thread while the host's loop keeps reading commands (so Stop load
answers at once); live timing is paused meanwhile, since both would fight for the cores.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from engine import backends
from engine.backends.base import Prepared, PrepareRequest
from engine.errors import OpScopeError
from engine.events import (
    Calibrated,
    CommandFailed,
    Event,
    Marker,
    ModelLoaded,
    Notice,
    Progress,
    RunEnded,
    drive,
)
from engine.run import commands as cmds
from engine.run.live import Staged
from engine.serve.batching import BatchPolicy
from engine.serve.calibration import calibration_context, load_or_calibrate
from engine.serve.loop import ServingLoop
from engine.serve.service import ServiceModel
from engine.serve.setup import prepare_serving
from engine.serve.summary import describe_setup, served
from engine.serve.traffic import make_schedule, parse_traffic

REPORT_S = 0.25  # the app's curves move four times a second during a load run


class ServingJob:
    """One load run or calibration on a worker thread; `done` once it has finished."""

    def __init__(
        self, staged: Staged, request: PrepareRequest, put: Callable[[Event], None]
    ) -> None:
        self.staged = staged
        self.request = request
        self.put = put
        self.loop: ServingLoop | None = None
        self.stopping = threading.Event()
        self.done = threading.Event()
        self._own: Prepared | None = None

    def start(self, cmd: cmds.ServeLoad | cmds.Calibrate) -> None:
        target = self._load if isinstance(cmd, cmds.ServeLoad) else self._calibrate
        threading.Thread(
            target=self._guard, args=(target, cmd), name="opscope-serving", daemon=True
        ).start()

    def stop(self) -> None:
        """Stop sending: what was sent is served, the run is recorded."""
        self.stopping.set()
        if self.loop is not None:
            self.loop.stop.set()

    def cancel(self) -> None:
        """Stop now (the host is closing): what still waits is not served, the run is
        recorded cancelled, and the loop's threads are out of the engine when `done`."""
        self.stopping.set()
        if self.loop is not None:
            self.loop.cancel()

    # -- work ---------------------------------------------------------------------------
    def _guard(self, target: Callable[[Any], None], cmd: Any) -> None:
        name = "load" if isinstance(cmd, cmds.ServeLoad) else "calibrate"
        try:
            target(cmd)
        except OpScopeError as exc:
            self.put(CommandFailed(name, str(exc)))
        except Exception as exc:  # a bug: the window says so, live timing resumes
            self.put(CommandFailed(name, f"internal error: {exc!r}"))
            traceback.print_exc()
        finally:
            if self._own is not None:
                self._own.close()
            self.done.set()

    def _prepared(self) -> Prepared:
        """The loaded model with one sample per request: the running one when its batch is
        1, else the same config at batch 1, prepared here."""
        if self.staged.batch == 1:
            return self.staged.prepared
        self.put(Notice("info", "serving prepares the model at batch 1: one request is one "
                        "sample; batching is the Traffic dock's max batch"))  # fmt: skip
        config = dataclasses.replace(self.staged.config, batch=1)
        self._own = backends.prepare(
            dataclasses.replace(self.request, config=config), self._progress_only
        )
        return self._own

    def _progress_only(self, ev: Event) -> None:
        """Preparing batch 1 is a step of this run, not a run: its facts stay here."""
        if isinstance(ev, Progress | Notice):
            self.put(ev)

    def _load(self, cmd: cmds.ServeLoad) -> None:
        spec = parse_traffic(cmd.traffic)
        policy = BatchPolicy.from_json(cmd.batching)
        schedule = make_schedule(spec, cmd.duration_s, cmd.seed, cmd.repeat)
        prepared = self._prepared()
        serving = prepare_serving(prepared, policy, self.request.model_path)
        if self.stopping.is_set():
            return
        setup = describe_setup(
            spec, serving.policy, seed=cmd.seed, duration_s=cmd.duration_s, cache=cmd.cache,
            repeat=cmd.repeat,
        )  # fmt: skip
        for ev in self.staged.facts:  # the run's facts: same model, config and provider
            self.put(ev)
        for note in serving.notices:
            self.put(note)
        self.put(Marker("load", f"load {spec.text}, {serving.policy.describe()}",
                        time.perf_counter_ns()))  # fmt: skip
        self.loop = loop = ServingLoop(
            serving.run_batch, serving.request_feeds, schedule, serving.policy,
            cache_size=cmd.cache, warmup_s=cmd.warmup_s, report_s=REPORT_S,
        )  # fmt: skip
        if self.stopping.is_set():
            loop.cancel()
        try:
            drive(served(loop, setup, cmd.warmup_s), self.put)
        except Exception as exc:
            self.put(RunEnded("error", str(exc)))
            raise
        self.put(RunEnded("cancelled" if self.stopping.is_set() else "ok",
                          "stopped by the user" if self.stopping.is_set() else None))  # fmt: skip

    def _calibrate(self, cmd: cmds.Calibrate) -> None:
        prepared = self._prepared()
        policy = BatchPolicy(max_batch=cmd.max_batch, instances=cmd.instances)
        serving = prepare_serving(prepared, policy, self.request.model_path)
        model = next((ev for ev in self.staged.facts if isinstance(ev, ModelLoaded)), None)
        context = calibration_context(
            model.info.sha256 if model else "",
            prepared.config.to_json(),
            prepared.provider_used,
            serving.policy.max_batch,
            cmd.instances,
        )
        for item in load_or_calibrate(serving, context, cmd.remeasure):
            if isinstance(item, ServiceModel):
                self.put(Calibrated(item.to_json()))
            else:
                self.put(item)
