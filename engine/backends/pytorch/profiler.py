"""Per-op profiling of a PyTorch model with `torch.profiler`, into the same records as ORT's.

Each profiled inference runs inside `record_function("opscope_run_<i>")`; the ops directly
under it (the top-level aten calls: `aten::linear`, `aten::conv2d`, or a compiled region)
become the per-node rows, named `<op>#<k>` by their order within the inference so the
same op is one node across inferences. A row's time is the op's inclusive time (so nested
calls like `aten::addmm` inside `aten::linear` are not counted twice), its bytes are the
bytes of its tensor inputs (output shapes are not recorded by the profiler), and its FLOPs
are those torch's FLOP counter reports for it and its children (`with_flops=True`).
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from engine.events import OpProfile, Progress
from engine.measure.op_stats import OpStat, coverage, node_stats, op_type_stats
from engine.measure.op_trace import NodeEvent, ProfileTrace, RunSpan

PROFILE_WARMUP = 3
RUN_PREFIX = "opscope_run_"
_ITEMSIZE = {
    "float": 4,
    "double": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "long int": 8,
    "long": 8,
    "int": 4,
    "short": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::qint8": 1,
    "c10::quint8": 1,
}


def torch_profile_pass(
    run_once: Callable[[], object], *, runs: int, cuda: bool, timed_mean_ms: float | None = None
) -> Iterator[Progress | OpProfile]:
    """Profile `runs` inferences of `run_once` after a short warm-up; yield an OpProfile."""
    import warnings

    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    # torch 2.11 on CUDA warned, once per process, that a cycle's events are cleared: this
    # pass is one cycle and reads its events itself (seen on an H200, gpu_check)
    warnings.filterwarnings("ignore", message="Profiler clears events", category=UserWarning)

    provider = "torch-cuda" if cuda else "torch-cpu"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    yield Progress("profile", 0, runs, "profiling with torch.profiler")
    for _ in range(PROFILE_WARMUP):
        run_once()
    with profile(activities=activities, record_shapes=True, with_flops=True) as prof:
        for i in range(runs):
            with record_function(f"{RUN_PREFIX}{i}"):
                run_once()
            if cuda:
                torch.cuda.synchronize()
            if i % 5 == 4:
                yield Progress("profile", i + 1, runs, f"profiled {i + 1}/{runs} inferences")
    trace, flops = trace_from_events(list(prof.events()), provider, cuda)
    yield make_op_profile(trace, flops, provider, timed_mean_ms)


def trace_from_events(
    events: list[Any], provider: str, cuda: bool = False
) -> tuple[ProfileTrace, dict[str, float]]:
    """Run spans and top-level op rows from profiler events; FLOPs summed per node name."""
    run_events = sorted(
        (e for e in events if e.name.startswith(RUN_PREFIX)), key=lambda e: e.time_range.start
    )
    index = {id(e): i for i, e in enumerate(run_events)}
    runs = tuple(
        RunSpan(i, float(e.time_range.start), float(e.time_range.elapsed_us()))
        for i, e in enumerate(run_events)
    )
    nodes: list[NodeEvent] = []
    flops: dict[str, float] = defaultdict(float)
    seen: Counter[tuple[int, str]] = Counter()
    for e in sorted(events, key=lambda e: e.time_range.start):
        parent = e.cpu_parent
        if parent is None or id(parent) not in index:
            continue
        run = index[id(parent)]
        k = seen[(run, e.name)]
        seen[(run, e.name)] += 1
        name = f"{e.name}#{k}"
        shapes = _tensor_inputs(e)
        dur = float(e.time_range.elapsed_us())
        if cuda:
            dur = max(dur, float(getattr(e, "device_time_total", 0.0)))
        nodes.append(
            NodeEvent(
                run_index=run,
                name=name,
                op_type=e.name,
                provider=provider,
                start_us=float(e.time_range.start - parent.time_range.start),
                dur_us=dur,
                input_shapes=shapes,
                output_shapes=(),
                activation_bytes=_nbytes(shapes),
                parameter_bytes=0,
                output_bytes=0,
            )
        )
        flops[name] += _subtree_flops(e)
    return ProfileTrace(runs=runs, nodes=tuple(nodes)), dict(flops)


def make_op_profile(
    trace: ProfileTrace, flops: dict[str, float], provider: str, timed_mean_ms: float | None
) -> OpProfile:
    """The OpProfile of a torch trace: ORT's statistics, with torch's FLOP counts."""
    n = max(1, len(trace.runs))
    per_node = {name: total / n for name, total in flops.items()}
    ops = [_with_flops(s, per_node.get(s.name)) for s in node_stats(trace)]
    type_flops: dict[str, float] = defaultdict(float)
    for s in ops:
        type_flops[s.op_type] += per_node.get(s.name, 0.0)
    types = [_with_flops(s, type_flops.get(s.name)) for s in op_type_stats(trace)]
    overhead = None
    if timed_mean_ms and trace.runs:
        overhead = float(np.mean([r.dur_us for r in trace.runs])) / 1e3 / timed_mean_ms - 1.0
    return OpProfile(
        ops=ops,
        op_types=types,
        coverage=coverage(trace),
        runs=len(trace.runs),
        provider_nodes={provider: len(ops)},
        trace=trace,
        profile_overhead=overhead,
    )


def _with_flops(s: OpStat, flops: float | None) -> OpStat:
    if not flops:
        return s
    total = round(flops)
    seconds = s.time_ms / 1e3
    return dataclasses.replace(
        s,
        flops=total,
        gflops=total / seconds / 1e9 if seconds > 0 else None,
        intensity=total / s.bytes if s.bytes else None,
    )


def _subtree_flops(e: Any) -> float:
    total = float(e.flops or 0)
    for child in e.cpu_children:
        total += _subtree_flops(child)
    return total


def _tensor_inputs(e: Any) -> tuple[tuple[str, tuple[int, ...]], ...]:
    shapes = e.input_shapes or []
    dtypes = getattr(e, "input_dtypes", None) or [""] * len(shapes)
    out = []
    for shape, dtype in zip(shapes, dtypes, strict=False):
        if (
            dtype in _ITEMSIZE
            and isinstance(shape, list)
            and all(isinstance(d, int) for d in shape)
        ):
            out.append((str(dtype), tuple(int(d) for d in shape)))
    return tuple(out)


def _nbytes(shapes: tuple[tuple[str, tuple[int, ...]], ...]) -> int:
    return sum(_ITEMSIZE[d] * int(np.prod(s, dtype=np.int64)) for d, s in shapes)
