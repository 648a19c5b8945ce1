"""The profiling pass: a separate ORT session with the profiler on, K inferences, parsed
into per-node records. Never mixed into timing (profiling adds 8-22% latency).

ONNX Runtime's profiler keeps at most 1,000,000 events per session (profiler.cc,
`global_max_num_events_`): one per node executed, two per run and two for the session.
Past it, it drops every further event and logs its own colour-coded ERROR line
("Maximum number of events reached"). The pass therefore asks only for as many runs as
fit (nodes x runs is known before the first run) and says so in one line; the session's
own log is kept off the terminal (`plan_session(profiling=True)`), and runs a Loop's
iterations pushed past the cap anyway are said as missing."""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from engine.backends.ort.inference_session import open_session, plan_session
from engine.config import RunConfig
from engine.errors import ModelError
from engine.events import Notice, OpProfile, Progress
from engine.model.inputs import Feeds

PROFILE_WARMUP = 3
ORT_MAX_EVENTS = 1_000_000  # ONNX Runtime's profiler cap per session (profiler.cc)
SESSION_EVENTS = 2  # model_loading_uri, session_initialization
RUN_EVENTS = 2  # model_run, SequentialExecutor::Execute
LAYOUT_MARGIN = 1.05  # the optimizer may add nodes (layout reorders, copies) to the file's


def runs_that_fit(
    nodes: int, runs: int, *, warmup: int = PROFILE_WARMUP, max_events: int = ORT_MAX_EVENTS
) -> tuple[int, int]:
    """(warm-up runs, profiled runs) that fit under the profiler's event cap for a model of
    `nodes` nodes: `runs` and `warmup` when they fit, else fewer (warm-up first; at least
    one profiled run, which the cap may still cut short)."""
    per_run = int(nodes * LAYOUT_MARGIN) + RUN_EVENTS
    fit = max(0, max_events - SESSION_EVENTS) // per_run
    if fit >= warmup + runs:
        return warmup, runs
    kept_warmup = min(warmup, max(0, fit - 1))
    return kept_warmup, max(1, min(runs, fit - kept_warmup))


def model_nodes(path: str | Path) -> int | None:
    """Nodes in the model file, subgraphs' included once (None: the file cannot be read;
    ORT opened it, so the cap is then left to the check after the runs)."""
    try:
        import onnx

        graph = onnx.load(str(path), load_external_data=False).graph
    except Exception:
        return None
    count, todo = 0, [graph]
    while todo:
        g = todo.pop()
        count += len(g.node)
        for node in g.node:
            for attr in node.attribute:
                if attr.HasField("g"):
                    todo.append(attr.g)
                todo.extend(attr.graphs)
    return count


def profile_pass(
    model_path: str | Path,
    config: RunConfig,
    feeds: Feeds,
    *,
    runs: int = 20,
    gpu_present: bool = False,
    timed_mean_ms: float | None = None,
    max_events: int = ORT_MAX_EVENTS,
) -> Iterator[Progress | Notice | OpProfile]:
    """Profile `runs` inferences after a short warm-up (fewer where they would pass the
    profiler's event cap, said in a Notice); yield progress then an OpProfile."""
    from engine.measure.op_stats import coverage, node_stats, op_type_stats
    from engine.measure.op_trace import parse_ort_profile
    from engine.model.weights import conv_weight_shapes

    nodes = model_nodes(model_path)
    warmup, asked = PROFILE_WARMUP, runs
    if nodes is not None:
        warmup, runs = runs_that_fit(nodes, runs, max_events=max_events)
        if runs < asked:
            yield Notice(
                "warning",
                f"profiling {runs} of the {asked} runs asked: {nodes:,} nodes x "
                f"{asked + PROFILE_WARMUP} runs would pass ONNX Runtime's profiler cap of "
                f"{max_events:,} events",
            )
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
        total = warmup + runs
        for i in range(total):
            sess.run(None, feeds)
            if i >= warmup and (i - warmup) % 5 == 4:
                yield Progress(
                    "profile",
                    i - warmup + 1,
                    runs,
                    f"profiled {i - warmup + 1}/{runs} inferences",
                )
        yield Progress("profile", runs, runs, "writing the profile")  # the last runs, a
        path = sess.end_profiling()  # file of up to ONNX Runtime's event cap, then its read:
        del sess, opened  # seconds each on a large graph, said rather than left silent
        yield Progress("profile", runs, runs, f"reading the profile ({_mb(path)})")
        whole = parse_ort_profile(Path(path))
        if len(whole.runs) < total:  # the cap cut them (a Loop's iterations, uncounted)
            said = (
                f"ONNX Runtime's profiler stopped at its cap of {max_events:,} events: "
                f"{max(0, len(whole.runs) - warmup)} of {runs} profiled runs recorded"
            )
            if len(whole.runs) <= warmup:  # only warm-up runs: nothing honest to show
                raise ModelError(f"{Path(model_path).name}: {said}")
            yield Notice("warning", said)
        trace = whole.drop_runs(warmup)
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


def _mb(path: str) -> str:
    try:
        return f"{Path(path).stat().st_size / 1e6:,.0f} MB"
    except OSError:
        return "size unknown"
