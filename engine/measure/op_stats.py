"""Per-node and per-op-type statistics over the inferences of one profiling pass.

Pure functions of a ProfileTrace. Every statistic is computed from the per-inference rows:
a node's time in one inference is the sum of its executions' *self* time (a Loop body
node runs once per iteration; an If/Loop/Scan is charged only the time not spent in its
body's nodes, which are rows of their own), and an inference in which a node did not run
counts as 0. So node means add up to the mean summed node time, shares add up to 1, and
op-type times are sums of node times.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from engine.measure.flops import node_flops
from engine.measure.op_families import is_shape_only
from engine.measure.op_trace import NodeEvent, ProfileTrace
from engine.model.weights import Shape, profile_key

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class OpStat:
    """One node (or one op type) over the kept profiled inferences."""

    name: str
    op_type: str
    provider: str
    calls: int | None  # executions per inference (1 for a node; an op type: its node count;
    # None: a session file without the column, shown "-")
    time_ms: float  # mean time per inference
    p50_ms: float  # of the per-inference time distribution
    p99_ms: float
    share: float  # of the summed node time per inference (0..1)
    bytes: int | None  # per inference: activation + parameter + output bytes (None: as calls)
    gbps: float | None  # bytes / time
    flops: int | None  # per inference
    gflops: float | None
    intensity: float | None  # flops / bytes


@dataclass(slots=True)
class _Series:
    """One node's (or op type's) raw per-inference sums, before they become an OpStat."""

    name: str
    op_type: str
    providers: set[str]
    times_us: FloatArray
    counts: npt.NDArray[np.int64]
    bytes_total: float = 0.0  # over all inferences
    flops_total: float | None = 0.0  # None once any execution has no FLOP model
    members: int = 1
    moves_data: bool = False  # any execution did more than reshape or compute on shapes


Weights = Mapping[str, Shape]  # convolution weight shapes by graph node name (model file)


def node_stats(trace: ProfileTrace, weights: Weights | None = None) -> list[OpStat]:
    """One OpStat per node (subgraph nodes qualified by their parent), by time, largest first.
    `weights` (`engine.model.weights.conv_weight_shapes`) gives the FLOPs of convolutions
    whose weight the profile leaves out (QLinearConv, NHWC)."""
    series = _node_series(trace, weights)
    return _finish(series, len(trace.runs), calls_of=lambda s: int(s.counts.max(initial=0)))


def op_type_stats(trace: ProfileTrace, weights: Weights | None = None) -> list[OpStat]:
    """One OpStat per op type (name == op_type, calls == node count), largest time first."""
    runs = len(trace.runs)
    groups: dict[str, _Series] = {}
    for node in _node_series(trace, weights):
        group = groups.get(node.op_type)
        if group is None:
            groups[node.op_type] = _Series(
                name=node.op_type,
                op_type=node.op_type,
                providers=set(node.providers),
                times_us=node.times_us.copy(),
                counts=node.counts.copy(),
                bytes_total=node.bytes_total,
                flops_total=node.flops_total,
                moves_data=node.moves_data,
            )
            continue
        group.providers |= node.providers
        group.times_us += node.times_us
        group.counts += node.counts
        group.bytes_total += node.bytes_total
        group.flops_total = _add(group.flops_total, node.flops_total)
        group.members += 1
        group.moves_data = group.moves_data or node.moves_data
    return _finish(list(groups.values()), runs, calls_of=lambda s: s.members)


def coverage(trace: ProfileTrace) -> float:
    """Summed node self time / summed model_run time: how much of an inference the kernels
    explain (the rest is executor, allocation and profiler overhead)."""
    run_us = sum(r.dur_us for r in trace.runs)
    return sum(n.self_us for n in trace.nodes) / run_us if run_us > 0 else 0.0


def slow_run_attribution(trace: ProfileTrace, quantile: float = 0.99) -> list[tuple[str, float]]:
    """Nodes slower than their own median in the slowest inferences (model_run at or above
    `quantile`): mean excess in ms over those inferences, positive only, largest first."""
    if not 0.0 <= quantile <= 1.0:
        raise ValueError(f"quantile must be within [0, 1], got {quantile}")
    if not trace.runs:
        return []
    durations = np.array([r.dur_us for r in trace.runs], dtype=np.float64)
    slow = durations >= np.quantile(durations, quantile)
    excess: list[tuple[str, float]] = []
    for node in _node_series(trace):
        over_us = float(np.mean(node.times_us[slow] - np.median(node.times_us)))
        if over_us > 0:
            excess.append((node.name, over_us / 1e3))
    return sorted(excess, key=lambda item: (-item[1], item[0]))


# The fields of one operator's row, in the order reports, exports and session rows use.
STAT_KEYS = (
    "name",
    "op_type",
    "provider",
    "calls",
    "time_ms",
    "p50_ms",
    "p99_ms",
    "share",
    "bytes",
    "gbps",
    "flops",
    "gflops",
    "intensity",
)


def stat_to_json(s: OpStat) -> dict[str, str | int | float | None]:
    """A JSON-ready dict with plain Python numbers (for reports, exports and the CLI)."""
    return {key: getattr(s, key) for key in STAT_KEYS}


def _node_series(trace: ProfileTrace, weights: Weights | None = None) -> list[_Series]:
    """Per-inference self time, execution count, bytes and FLOPs of every node."""
    runs = len(trace.runs)
    by_name: dict[str, _Series] = {}
    for event in trace.nodes:
        key = event.qualified_name
        series = by_name.get(key)
        if series is None:
            series = by_name[key] = _Series(
                name=key,
                op_type=event.op_type,
                providers=set(),
                times_us=np.zeros(runs, dtype=np.float64),
                counts=np.zeros(runs, dtype=np.int64),
            )
        if event.provider:
            series.providers.add(event.provider)
        series.times_us[event.run_index] += event.self_us
        series.counts[event.run_index] += 1
        series.bytes_total += node_bytes(event)
        series.moves_data = series.moves_data or not moves_no_data(event)
        weight = weights.get(profile_key(event.name)) if weights else None
        series.flops_total = _add(
            series.flops_total,
            node_flops(event.op_type, event.input_shapes, event.output_shapes, weight),
        )
    return list(by_name.values())


def _finish(
    series: Iterable[_Series], runs: int, calls_of: Callable[[_Series], int]
) -> list[OpStat]:
    """Turn raw per-inference sums into OpStats sorted by mean time (then name)."""
    rows = list(series)
    if runs == 0 or not rows:
        return []
    total_us = sum(float(np.mean(s.times_us)) for s in rows)
    stats = [_stat(s, runs, total_us, calls_of(s)) for s in rows]
    return sorted(stats, key=lambda s: (-s.time_ms, s.name))


def _stat(s: _Series, runs: int, total_us: float, calls: int) -> OpStat:
    mean_us = float(np.mean(s.times_us))
    time_ms = mean_us / 1e3
    per_run_bytes = round(s.bytes_total / runs)
    flops = None if s.flops_total is None else round(s.flops_total / runs)
    seconds = time_ms / 1e3 if s.moves_data else 0.0  # no data moved: no rates to give
    return OpStat(
        name=s.name,
        op_type=s.op_type,
        provider=",".join(sorted(s.providers)),
        calls=calls,
        time_ms=time_ms,
        p50_ms=float(np.percentile(s.times_us, 50)) / 1e3,
        p99_ms=float(np.percentile(s.times_us, 99)) / 1e3,
        share=mean_us / total_us if total_us > 0 else 0.0,
        bytes=per_run_bytes,
        gbps=per_run_bytes / seconds / 1e9 if seconds > 0 else None,
        flops=flops,
        gflops=flops / seconds / 1e9 if flops is not None and seconds > 0 else None,
        intensity=(flops / per_run_bytes if flops is not None and per_run_bytes > 0
                   and s.moves_data else None),
    )  # fmt: skip


SHAPE_DTYPES = ("int64", "int32")
SHAPE_ELEMENTS = 16  # a shape vector has one element per dimension


def moves_no_data(event: NodeEvent) -> bool:
    """A node that only reshapes (`is_shape_only`) or computes on shapes (every input and
    output a short int64/int32 vector or scalar: Gather, Concat, Unsqueeze on a Shape's
    output); its bytes over its time is no bandwidth."""
    if is_shape_only(event.op_type):
        return True
    tensors = [*event.input_shapes, *event.output_shapes]
    return bool(tensors) and all(
        dtype in SHAPE_DTYPES and len(shape) <= 1 and (not shape or 0 <= shape[0] <= SHAPE_ELEMENTS)
        for dtype, shape in tensors
    )


def node_bytes(event: NodeEvent) -> int:
    """Bytes one node execution moves: its inputs as read (the weights ORT pre-packed out of
    the profile added, a gather's untouched table rows left out) and its outputs."""
    return (
        event.activation_bytes
        + event.parameter_bytes
        - untouched_gather_bytes(event)
        + event.output_bytes
        + prepacked_weight_bytes(event)
    )


_GATHER_OPS = {"Gather", "GatherElements", "GatherND"}


def untouched_gather_bytes(event: NodeEvent) -> int:
    """Bytes of a gather's data input that it never reads. The profile counts the whole
    table (an embedding's 47 MB for 128 tokens' 197 KB); a gather reads only the rows it
    outputs, so at most as many bytes as it writes. 0 for other ops or unknown shapes."""
    if event.op_type not in _GATHER_OPS or not event.input_shapes:
        return 0
    dtype, shape = event.input_shapes[0]
    if not shape or any(d < 0 for d in shape):
        return 0
    data = int(np.prod(shape, dtype=np.int64)) * _ITEMSIZE.get(dtype, 4)
    listed = event.activation_bytes + event.parameter_bytes
    return max(0, min(data, listed) - event.output_bytes)


# ORT's CPU kernels pre-pack constant MatMul/Gemm weights at session creation and then leave
# them out of the profile's input list and parameter_size, although every inference reads
# them. Without this, those ops' bytes (and so GB/s and intensity) would be far too low.
_PREPACKING_OPS = {
    "MatMul",
    "FusedMatMul",
    "Gemm",
    "FusedGemm",
    "MatMulIntegerToFloat",
    "DynamicQuantizeMatMul",
    "MatMulInteger",
    "QGemm",
}
_INT8_WEIGHT_OPS = {"MatMulIntegerToFloat", "DynamicQuantizeMatMul", "MatMulInteger", "QGemm"}
_ITEMSIZE = {
    "float": 4,
    "float16": 2,
    "double": 8,
    "bfloat16": 2,
    "int8": 1,
    "uint8": 1,
    "int32": 4,
    "int64": 8,
}


def prepacked_weight_bytes(event: NodeEvent) -> int:
    """Bytes of a K x N weight the profile omitted (0 when the weight is listed)."""
    if event.op_type not in _PREPACKING_OPS or not event.input_shapes or not event.output_shapes:
        return 0
    dtype, a = event.input_shapes[0]
    out = event.output_shapes[0][1]
    if not a or not out:
        return 0
    n = out[-1]
    rows = int(np.prod(out[:-1], dtype=np.int64)) if len(out) > 1 else 1
    a_elems = int(np.prod(a, dtype=np.int64))
    if rows <= 0 or n <= 0 or a_elems % rows:
        return 0
    k = a_elems // rows
    for _, shape in event.input_shapes[1:]:
        elems = int(np.prod(shape, dtype=np.int64))
        if elems and elems % (k * n) == 0:
            return 0  # B (maybe batched) is listed: already counted in the profile's sizes
    itemsize = 1 if event.op_type in _INT8_WEIGHT_OPS else _ITEMSIZE.get(dtype, 4)
    return k * n * itemsize


def _add(total: float | None, value: float | None) -> float | None:
    return None if total is None or value is None else total + value
