"""What one ONNX Runtime session of a model holds and where its load time goes, measured:
the process's resident memory before the session, after it is made, after the first
inference and at steady state; the session's wall time beside the profiler's own
`model_loading_*` and `session_initialization` records; the graph as run (the optimized
model ONNX Runtime saves) in the order the profiler saw the nodes run, with the output
sizes it saw. engine/run/memory_job.py turns this into the memory report."""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.backends.ort.device_memory import DeviceMemory
from engine.backends.ort.graph_as_run import saving_plan
from engine.backends.ort.inference_session import (
    GPU_PROVIDERS,
    build_options,
    create_session,
)
from engine.config import RunConfig
from engine.errors import ModelError, one_line
from engine.events import Event, Progress
from engine.measure.op_trace import NodeEvent, ProfileFormatError, load_profile, parse_ort_profile
from engine.model.graph_io import NodeIO, graph_nodes


@dataclass
class Probe:
    provider_used: str
    session_s: float  # wall time of InferenceSession(...)
    model_loading_s: float | None  # the profiler's records, inside session_s
    session_initialization_s: float | None
    rss: dict[str, int] = field(default_factory=dict)  # stage -> bytes
    as_run: list[NodeIO] = field(default_factory=list)  # in executed order
    observed: dict[str, float] = field(default_factory=dict)  # tensor -> bytes, as run
    as_run_error: str | None = None
    weights: frozenset[str] = frozenset()  # the optimized graph's initializers
    graph_outputs: set[str] = field(default_factory=set)
    device: dict[str, Any] = field(default_factory=dict)  # a GPU's memory, at the stages
    weights_copy: dict[str, Any] | None = None  # the weights copied to the GPU (weight_copy)


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def probe_job(
    path: str, config: RunConfig, feeds: Mapping[str, np.ndarray], runs: int
) -> Generator[Event, None, dict[str, Any]]:
    """The probe as a job, for a process of its own (a clean resident-memory baseline):
    its result as plain data, the as-run liveness already computed."""
    yield Progress("memory", 0, None, "measuring one session's memory and load time")
    p = probe(path, config, feeds, runs)
    from engine.measure.liveness import liveness

    as_run = None
    if p.as_run:
        outputs = [o for n in p.as_run for o in n.outputs]
        produced = set(outputs)
        inputs = [t for t in feeds if t not in produced]
        ends = [o for o in outputs if o in p.graph_outputs]
        sizes = {**{k: float(v.nbytes) for k, v in feeds.items()}, **p.observed}
        as_run = liveness(p.as_run, sizes, inputs, ends, weights=p.weights).to_json()
    return {
        "provider_used": p.provider_used,
        "session_s": p.session_s,
        "model_loading_s": p.model_loading_s,
        "session_initialization_s": p.session_initialization_s,
        "rss": p.rss,
        "as_run": as_run,
        "as_run_nodes": len(p.as_run),
        "as_run_error": p.as_run_error,
        "device": p.device,
        "weights_copy": p.weights_copy,
    }


def probe(path: str, config: RunConfig, feeds: Mapping[str, np.ndarray], runs: int) -> Probe:
    """One session of `path` on `config`'s provider, threads and fusion level, run
    1 + `runs` times on `feeds`, profiled (the timing is not this probe's business)."""

    with tempfile.TemporaryDirectory(prefix="opscope-mem-") as tmp:
        plan, optimized = saving_plan(config, tmp)
        so = build_options(plan)
        on_gpu = any(n in GPU_PROVIDERS for n, _ in plan.providers)
        device = DeviceMemory(on_gpu)
        device.read("before_session")
        rss = {"before_session": _rss()}
        t0 = time.perf_counter()
        try:
            sess, _ = create_session(path, so, list(plan.providers))
        except Exception as exc:
            raise ModelError(one_line(exc), path) from exc
        session_s = time.perf_counter() - t0
        rss["after_session"] = _rss()
        device.read("after_session")
        try:
            sess.run(None, dict(feeds))
            rss["after_first_run"] = _rss()
            steady = rss["after_first_run"]
            for _ in range(max(runs, 1)):
                sess.run(None, dict(feeds))
                steady = max(steady, _rss())
            rss["steady"] = steady
            device.read("steady")
        except Exception as exc:
            raise ModelError(f"an inference failed: {one_line(exc)}", path) from exc
        profile_path = sess.end_profiling()
        result = Probe(sess.get_providers()[0], session_s, None, None, rss)
        result.device = device.reading()
        device.close()
        if result.provider_used in GPU_PROVIDERS:  # after every reading: its copies are its own
            result.weights_copy = _weights_copy(path)
        _read_profile(profile_path, optimized, result)
        del sess
    return result


def _weights_copy(path: str) -> dict[str, Any]:
    from engine.backends.ort.weight_copy import copy_to_device

    try:
        return copy_to_device(path, "cuda")
    except Exception as exc:  # measured beside the session: its failure is a line, not the run's
        return {"error": one_line(exc)[:300]}


def _read_profile(profile_path: str, optimized: str, result: Probe) -> None:
    try:
        events = load_profile(profile_path)  # in batches: the parent's progress goes on
    except (OSError, ValueError) as exc:
        result.as_run_error = f"the profile could not be read: {one_line(exc)}"
        return
    for e in events if isinstance(events, list) else []:
        if isinstance(e, dict) and e.get("cat") == "Session":
            name, dur = e.get("name"), e.get("dur")
            if isinstance(dur, int | float) and name in (
                "model_loading_uri",
                "model_loading_array",
            ):
                result.model_loading_s = dur / 1e6
            elif isinstance(dur, int | float) and name == "session_initialization":
                result.session_initialization_s = dur / 1e6
    try:
        trace = parse_ort_profile(events)
    except (ProfileFormatError, ValueError) as exc:
        result.as_run_error = f"the profile could not be parsed: {exc}"
        return
    first = [n for n in trace.run_nodes(trace.runs[-1].run_index) if not n.parent]
    _as_run(optimized, first, result)


def _as_run(optimized: str, executed: list[NodeEvent], result: Probe) -> None:
    """The optimized graph's nodes in the order they ran, and the sizes they produced."""
    import onnx

    try:
        graph = onnx.load(optimized, load_external_data=False).graph
    except Exception as exc:  # not saved (too large for one file) or unreadable
        result.as_run_error = f"the optimized graph was not saved ({one_line(exc)})"
        return
    result.weights = frozenset(t.name for t in graph.initializer)
    result.graph_outputs = {o.name for o in graph.output}
    nodes = {n.name: n for n in graph_nodes(graph)}
    order = {ev.name: i for i, ev in enumerate(executed)}
    ran = sorted(nodes.values(), key=lambda n: order.get(n.name, len(order)))
    result.as_run = ran
    for ev in executed:
        node = nodes.get(ev.name)
        if node is None:
            continue
        outs = [o for o in node.outputs if o]
        for name, (dtype, shape) in zip(outs, ev.output_shapes, strict=False):
            with contextlib.suppress(TypeError, ValueError):
                item = np.dtype(_np_name(dtype)).itemsize
                result.observed[name] = float(np.prod(shape, dtype=np.float64)) * item


def _np_name(dtype: str) -> Any:
    """ORT's profile type names ('float', 'int64', 'float16', 'uint8', 'bool')."""
    return {"float": "float32", "double": "float64"}.get(dtype, dtype)
