"""Session-file test material shared by the store and file-safety tests: a real recorded
profile run of the demo CNN, and hand-made events of a live run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from engine.config import RunConfig
from engine.events import (
    AccuracyResult,
    LatencyBatch,
    Marker,
    ModelLoaded,
    RunStarted,
    Telemetry,
    TimingDone,
    VariantReady,
)
from engine.model_info import ModelInfo
from engine.results import RunResult
from engine.runner import BenchRequest, run_bench
from engine.session import Recorder, SessionStore
from engine.stats import is_stable, latency_stats, throughput
from engine.timing import TimingPlan
from tests.conftest import DEMO_CNN

SHORT = TimingPlan(warmup_runs=2, warmup_s=0.0, min_runs=5, duration_s=0.3)


def record_demo_profile(path: Path) -> RunResult:
    """A real profile run of the demo CNN, recorded to `path` and folded into a RunResult."""
    result = RunResult()
    req = BenchRequest(str(DEMO_CNN), timing=SHORT, profile=True, profile_runs=5)
    with SessionStore.create_or_open(path) as store:
        rec = Recorder(store, model_path=str(DEMO_CNN), kind="profile", config=req.config)
        for ev in run_bench(req):
            result.feed(ev)
            rec.feed(ev)
        rec.close()
    return result


def live_events(info: ModelInfo, batch: int = 2) -> dict[str, Any]:
    """Hand-made events of a live run: perf_counter stamps, origin, telemetry, markers."""
    origin = time.perf_counter_ns()
    lats = np.array([1_000_000, 1_200_000, 900_000, 1_100_000, 1_050_000], np.int64)
    starts = np.cumsum(lats) - lats[0]
    return {
        "origin": origin,
        "starts": starts,
        "lats": lats,
        "loaded": ModelLoaded(info),
        "variant": VariantReady(
            "int8-dynamic",
            "/cache/model.onnx",
            1.5,
            False,
            20,
            12,
            {"params": {"per_channel": False}},
        ),
        "started": RunStarted(
            RunConfig(precision="int8-dynamic", batch=batch, threads=2),
            "CPUExecutionProvider",
            "CPUExecutionProvider",
            ("CPUExecutionProvider",),
            {"image": ((batch, 3, 64, 64), "float32")},
            batch,
            0.25,
        ),
        "marker": Marker("config", "INT8 dynamic", origin - 5_000_000),
        "batches": [
            LatencyBatch(starts[:3], lats[:3], origin),
            LatencyBatch(starts[3:], lats[3:], origin),
        ],
        "telemetry": [
            Telemetry(origin + 100_000_000, {"cpu_percent": 50.0, "rss_mb": 80.5}),
            Telemetry(origin + 200_000_000, {"cpu_percent": 75.0, "rss_mb": 81.0}),
        ],
        "accuracy": AccuracyResult(
            "fp32", 0.06, 0.014, 0.9978, 1.0, 4, {"logits": {"cosine": 0.9978, "top1": None}}
        ),
        "done": TimingDone(
            latency_stats(lats), throughput(starts, lats, batch), is_stable(lats), 10, 0.01
        ),
    }
