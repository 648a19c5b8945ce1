"""Parse ONNX Runtime's profiler JSON into per-node, per-inference records.

What ONNX Runtime 1.31 writes (checked on real profiles, see tests/fixtures/make_profiles.py):

- A JSON list of Chrome-trace "X" events: {"cat", "pid", "tid", "dur", "ts", "ph", "name",
  "args"}; `ts` and `dur` are integer microseconds from the profiler's start.
- `cat == "Session"`: `model_loading_array` (or `model_loading_uri`), `session_initialization`,
  then per inference one `SequentialExecutor::Execute` per executed graph and one
  `model_run`, written after the node events they enclose.
- `cat == "Node"`: `<node name>_kernel_time` per kernel execution. `args` holds strings:
  `op_name`, `provider`, `node_index`, `activation_size`, `parameter_size`, `output_size`,
  `mem_*` counters and `thread_scheduling_stats` ("" with one thread, an object otherwise),
  plus lists `input_type_shape` / `output_type_shape` of one-key dicts ({"float": [8, 64]}).
  Inputs whose buffer is gone are left out: pre-packed weights (MatMul's and Gemm's B) and
  omitted optional inputs, so list positions do not match the ONNX input positions, and
  `parameter_size` then excludes the pre-packed weight. Older releases also wrote
  `_fence_before` / `_fence_after` events; they are skipped.
- Names ORT makes up: unnamed nodes become `<OpType>_<index>`; fusions read like
  `fused mm1/MatMulAddFusion`; NCHWc nodes are named after their output tensor
  (`r1_nchwc`) next to inserted `ReorderInput` / `ReorderOutput`; memcpy nodes are
  `Memcpy`, `Memcpy_token_<n>` (MemcpyFromHost / MemcpyToHost); inlined local functions are
  `_inlfunc_<Function>[_token_<n>]_<node>`; an If with a constant condition is inlined as
  `_if_<branch>_<node>`.
- Subgraph nodes (If/Loop/Scan bodies) keep their own names, unprefixed, and run once per
  iteration; the control-flow node's own event encloses them in time, so its duration
  includes theirs. `parent` and `self_us` below undo that double counting.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeGuard

KERNEL_SUFFIX = "_kernel_time"
# Ops whose kernel event encloses the events of the subgraph they run (ORT's own
# transformers profiler uses If/Loop/Scan; the generation ops run subgraphs too).
CONTROL_FLOW_OPS = frozenset(
    {"If", "Loop", "Scan", "BeamSearch", "GreedySearch", "Sampling", "WhisperBeamSearch"}
)
PARENT_SEPARATOR = " > "

Shapes = tuple[tuple[str, tuple[int, ...]], ...]


class ProfileFormatError(ValueError):
    """The profile is empty, truncated, not ORT's JSON, or holds no inference."""


@dataclass(frozen=True, slots=True)
class NodeEvent:
    """One execution of one node in one inference."""

    run_index: int  # which model_run (0-based, in time order)
    name: str  # node name without ORT's "_kernel_time" suffix
    op_type: str
    provider: str  # e.g. "CPUExecutionProvider"
    start_us: float  # offset from the start of its model_run
    dur_us: float
    input_shapes: Shapes  # (dtype, shape) per input ORT listed, from input_type_shape
    output_shapes: Shapes
    activation_bytes: int  # args.activation_size
    parameter_bytes: int  # args.parameter_size
    output_bytes: int  # args.output_size
    parent: str = ""  # enclosing control-flow node(s), outermost first; "" at top level
    self_us: float = -1.0  # dur_us minus enclosed subgraph node events; -1 means dur_us
    node_index: int = -1  # args.node_index; unique only within one (sub)graph

    def __post_init__(self) -> None:
        if self.self_us < 0:
            object.__setattr__(self, "self_us", self.dur_us)

    @property
    def qualified_name(self) -> str:
        """The name with its enclosing control-flow path, unique across subgraphs."""
        return f"{self.parent}{PARENT_SEPARATOR}{self.name}" if self.parent else self.name


@dataclass(frozen=True, slots=True)
class RunSpan:
    """One inference: a `model_run` Session event."""

    run_index: int
    start_us: float  # absolute ts from the profile
    dur_us: float  # model_run duration


@dataclass(frozen=True)
class ProfileTrace:
    """All inferences of one profiling pass and the node executions inside them."""

    runs: tuple[RunSpan, ...]
    nodes: tuple[NodeEvent, ...]

    def drop_runs(self, first_n: int) -> ProfileTrace:
        """Discard the first `first_n` (warm-up) inferences and renumber the rest from 0."""
        if first_n < 0 or first_n >= len(self.runs):
            raise ValueError(f"cannot drop {first_n} of {len(self.runs)} profiled runs")
        runs = tuple(replace(r, run_index=r.run_index - first_n) for r in self.runs[first_n:])
        nodes = tuple(
            replace(n, run_index=n.run_index - first_n)
            for n in self.nodes
            if n.run_index >= first_n
        )
        return ProfileTrace(runs=runs, nodes=nodes)

    def run_nodes(self, run_index: int) -> tuple[NodeEvent, ...]:
        """The node events of one inference, in start order."""
        return tuple(n for n in self.nodes if n.run_index == run_index)


def parse_ort_profile(source: str | Path | Sequence[Mapping[str, Any]]) -> ProfileTrace:
    """Read an ORT profile (a path, or its already-loaded event list) into records."""
    events: Any
    if isinstance(source, str | Path):
        label = str(source)
        events = _load_json(Path(source))
    else:
        label = "<events>"
        events = source
    if isinstance(events, dict) and isinstance(events.get("traceEvents"), list):
        events = events["traceEvents"]  # Chrome's object form, should someone re-save it
    if not isinstance(events, list):
        raise ProfileFormatError(f"{label}: expected a JSON list of trace events")
    for i, event in enumerate(events):
        if not isinstance(event, Mapping):
            raise ProfileFormatError(f"{label}: event {i} is not a JSON object")

    runs = _runs(events, label)
    kernels = [e for e in events if _is_kernel(e)]
    nodes: list[NodeEvent] = []
    starts = [r.start_us for r in runs]
    per_run: list[list[tuple[float, Mapping[str, Any]]]] = [[] for _ in runs]
    for event in kernels:
        ts, _ = _time(event, label)
        index = _run_of(ts, starts, runs)
        if index is not None:  # kernels outside every model_run are not inference work
            per_run[index].append((ts, event))
    for run, members in zip(runs, per_run, strict=True):
        nodes.extend(_nodes_of_run(run, members, label))
    return ProfileTrace(runs=tuple(runs), nodes=tuple(nodes))


PARSE_EVENTS = 20_000  # events per parse: other threads (progress, the signal watch) run between


def load_profile(path: str | Path) -> Any:
    """A profile file's JSON (ProfileFormatError, one line, when it cannot be read)."""
    return _load_json(Path(path))


def _load_json(path: Path) -> Any:
    try:
        with path.open(encoding="utf-8") as fh:
            events = events_by_line(fh)
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileFormatError(f"{path}: cannot read profile ({exc})") from exc
    if events is not None:
        return events
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileFormatError(f"{path}: cannot read profile ({exc})") from exc
    if not text.strip():
        raise ProfileFormatError(f"{path}: empty profile (did the session fail to load?)")
    try:
        return json.loads(text)
    except RecursionError as exc:
        raise ProfileFormatError(f"{path}: nests too deeply to read") from exc
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()):
            raise ProfileFormatError(f"{path}: truncated JSON ({exc.msg})") from exc
        raise ProfileFormatError(
            f"{path}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from exc


def events_by_line(lines: Iterable[str]) -> list[Any] | None:
    """ONNX Runtime's profile as it writes it, one event per line between '[' and ']',
    parsed PARSE_EVENTS lines at a time with the collector paused; None for any other
    layout (the caller parses it whole, with its errors). One json.loads of a 600,000-event
    profile (500 MB, a 100,000-node chain) was a C call that held the GIL for tens of
    seconds: no progress line, no Ctrl-C (the probe fuzz, stop 61), and every dict it made
    counted toward full collections of all the others."""
    it = (line.strip() for line in lines)
    if next((line for line in it if line), None) != "[":
        return None
    events: list[Any] = []
    batch: list[str] = []
    paused = gc.isenabled()
    gc.disable()
    try:
        for line in it:
            if line == "]":
                break
            if line:
                batch.append(line[:-1] if line.endswith(",") else line)
            if len(batch) >= PARSE_EVENTS:
                events += json.loads(f"[{','.join(batch)}]")
                batch.clear()
        else:
            return None  # no closing ']': truncated, said by the whole parse
        if any(line for line in it):
            return None  # something after the list
        if batch:
            events += json.loads(f"[{','.join(batch)}]")
    except (json.JSONDecodeError, RecursionError):
        return None  # not one event per line
    finally:
        if paused:
            gc.enable()
    return events


def _runs(events: Sequence[Mapping[str, Any]], label: str) -> list[RunSpan]:
    spans = sorted(
        _time(e, label)
        for e in events
        if e.get("cat") == "Session" and e.get("name") == "model_run"
    )
    if not spans:
        raise ProfileFormatError(f"{label}: no model_run events (no inference was profiled)")
    return [RunSpan(run_index=i, start_us=ts, dur_us=dur) for i, (ts, dur) in enumerate(spans)]


def _is_kernel(event: Mapping[str, Any]) -> bool:
    name = event.get("name")
    return event.get("cat") == "Node" and isinstance(name, str) and name.endswith(KERNEL_SUFFIX)


def _time(event: Mapping[str, Any], label: str) -> tuple[float, float]:
    ts, dur = event.get("ts"), event.get("dur")
    if not _is_number(ts) or not _is_number(dur):
        raise ProfileFormatError(f"{label}: event {event.get('name')!r} lacks numeric ts/dur")
    return float(ts), float(dur)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _run_of(ts: float, starts: list[float], runs: list[RunSpan]) -> int | None:
    """Index of the model_run whose [ts, ts + dur] holds `ts` (runs are sorted, disjoint)."""
    lo, hi = 0, len(starts)
    while lo < hi:  # last run starting at or before ts
        mid = (lo + hi) // 2
        if starts[mid] <= ts:
            lo = mid + 1
        else:
            hi = mid
    if lo == 0:
        return None
    run = runs[lo - 1]
    return run.run_index if ts <= run.start_us + run.dur_us else None


def _nodes_of_run(
    run: RunSpan, members: list[tuple[float, Mapping[str, Any]]], label: str
) -> list[NodeEvent]:
    """Build one inference's records in start order, nesting subgraph nodes in their parent."""
    members.sort(key=lambda m: (m[0], -_time(m[1], label)[1]))
    built: list[NodeEvent] = []
    child_time: list[float] = []
    stack: list[tuple[int, float]] = []  # (index in built, end ts) of open control-flow nodes
    for ts, event in members:
        _, dur = _time(event, label)
        # ts and dur are each truncated to whole microseconds: allow 1 us of slack at the end
        while stack and not (ts < stack[-1][1] and ts + dur <= stack[-1][1] + 1.0):
            stack.pop()
        parent = built[stack[-1][0]].qualified_name if stack else ""
        if stack:
            child_time[stack[-1][0]] += dur
        node = _node(event, run, ts, dur, parent)
        built.append(node)
        child_time.append(0.0)
        if node.op_type in CONTROL_FLOW_OPS:
            stack.append((len(built) - 1, ts + dur))
    return [
        replace(n, self_us=max(0.0, n.dur_us - spent)) if spent else n
        for n, spent in zip(built, child_time, strict=True)
    ]


def _node(event: Mapping[str, Any], run: RunSpan, ts: float, dur: float, parent: str) -> NodeEvent:
    args = event.get("args")
    args = args if isinstance(args, Mapping) else {}
    name = str(event["name"])[: -len(KERNEL_SUFFIX)]
    return NodeEvent(
        run_index=run.run_index,
        name=name,
        op_type=str(args.get("op_name", "")),
        provider=str(args.get("provider", "")),
        start_us=ts - run.start_us,
        dur_us=dur,
        input_shapes=_shapes(args.get("input_type_shape")),
        output_shapes=_shapes(args.get("output_type_shape")),
        activation_bytes=_size(args.get("activation_size")),
        parameter_bytes=_size(args.get("parameter_size")),
        output_bytes=_size(args.get("output_size")),
        parent=parent,
        node_index=_size(args.get("node_index"), missing=-1),
    )


def _size(value: object, missing: int = 0) -> int:
    """ORT writes sizes as decimal strings; tolerate numbers, and absent or garbled fields."""
    if _is_number(value):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return missing
    return missing


def _shapes(value: object) -> Shapes:
    """[{"float": [8, 64]}, ...] -> (("float", (8, 64)), ...); malformed entries are skipped."""
    if not isinstance(value, list):
        return ()
    out: list[tuple[str, tuple[int, ...]]] = []
    for entry in value:
        if not isinstance(entry, Mapping) or len(entry) != 1:
            continue
        ((dtype, dims),) = entry.items()
        if isinstance(dims, list) and all(_is_number(d) for d in dims):
            out.append((str(dtype), tuple(int(d) for d in dims)))
    return tuple(out)
