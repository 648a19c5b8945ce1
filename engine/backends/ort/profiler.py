"""The profiling pass: a separate ORT session with the profiler on, K inferences, parsed
into per-node records. Never mixed into timing (profiling adds 8-22% latency)."""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from engine.backends.ort.inference_session import open_session, plan_session
from engine.config import RunConfig
from engine.events import OpProfile, Progress
from engine.model.inputs import Feeds

PROFILE_WARMUP = 3


def profile_pass(
    model_path: str | Path,
    config: RunConfig,
    feeds: Feeds,
    *,
    runs: int = 20,
    gpu_present: bool = False,
    timed_mean_ms: float | None = None,
) -> Iterator[Progress | OpProfile]:
    """Profile `runs` inferences after a short warm-up; yield progress then an OpProfile."""
    from engine.measure.op_stats import coverage, node_stats, op_type_stats
    from engine.measure.op_trace import parse_ort_profile
    from engine.model.weights import conv_weight_shapes

    with tempfile.TemporaryDirectory(prefix="opscope-profile-") as tmp:
        plan = plan_session(
            config,
            gpu_present=gpu_present,
            profiling=True,
            profile_prefix=str(Path(tmp) / "ort_profile"),
        )
        yield Progress("profile", 0, runs, "opening a profiling session")
        opened = open_session(model_path, plan)
        sess = opened.session
        total = PROFILE_WARMUP + runs
        for i in range(total):
            sess.run(None, feeds)
            if i >= PROFILE_WARMUP and (i - PROFILE_WARMUP) % 5 == 4:
                yield Progress(
                    "profile",
                    i - PROFILE_WARMUP + 1,
                    runs,
                    f"profiled {i - PROFILE_WARMUP + 1}/{runs} inferences",
                )
        path = sess.end_profiling()
        del sess, opened
        trace = parse_ort_profile(Path(path)).drop_runs(PROFILE_WARMUP)
    providers: Counter[str] = Counter()
    seen: set[str] = set()
    for n in trace.nodes:
        if n.name not in seen:
            seen.add(n.name)
            providers[n.provider] += 1
    overhead = None
    if timed_mean_ms and trace.runs:
        profiled_ms = float(np.mean([r.dur_us for r in trace.runs])) / 1e3
        overhead = profiled_ms / timed_mean_ms - 1.0
    weights = conv_weight_shapes(model_path)
    yield OpProfile(
        ops=node_stats(trace, weights),
        op_types=op_type_stats(trace, weights),
        coverage=coverage(trace),
        runs=len(trace.runs),
        provider_nodes=dict(providers),
        trace=trace,
        profile_overhead=overhead,
    )
