"""The graph ONNX Runtime runs, for the graph view: the optimized model it saves after its
own fusion at the config's level and provider, and, from one profiled inference, the
dtype and shape of every tensor its nodes wrote (contrib ops such as Attention or
SkipLayerNormalization have no ONNX shape inference) and the provider each node ran on.

That one inference has a time limit (issue 53: a Loop of 10^12 iterations ran with no end):
past it the run is stopped between nodes (ONNX Runtime's `RunOptions.terminate`, as a signal
stops a command's runs: engine/interrupt.py), and the optimized graph, saved when the
session was made, is still returned, with a line saying what is missing and why."""

from __future__ import annotations

import contextlib
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine import interrupt
from engine.backends.ort.inference_session import (
    build_options,
    create_session,
    gpu_present,
    plan_session,
    stoppable_run_options,
)
from engine.config import RunConfig
from engine.errors import ModelError, one_line
from engine.measure.op_trace import ProfileFormatError, load_profile, parse_ort_profile
from engine.model.graph_view import Tensor

if TYPE_CHECKING:
    import onnx


@dataclass
class AsRun:
    model: onnx.ModelProto | None  # None: not saved (over 2 GB), `error` says so
    provider_used: str
    tensors: dict[str, Tensor] = field(default_factory=dict)  # as the profile saw them
    providers: dict[str, str] = field(default_factory=dict)  # node -> provider it ran on
    order: list[str] = field(default_factory=list)  # the nodes in the order they ran
    error: str | None = None


def saving_plan(config: RunConfig, folder: str) -> tuple[Any, str]:
    """A profiled session's plan (profile files in `folder`) that saves the optimized graph
    there too; that graph's path."""
    optimized = str(Path(folder) / "optimized.onnx")
    plan = plan_session(
        config,
        gpu_present=gpu_present(),
        profiling=True,
        profile_prefix=str(Path(folder) / "profile"),
        optimized_model_path=optimized,
    )
    return plan, optimized


def as_run(
    path: str,
    config: RunConfig,
    feeds: Mapping[str, np.ndarray],
    limit_s: float | None = None,
    stop: threading.Event | None = None,
    on_run: Callable[[], None] | None = None,
) -> AsRun:
    """The optimized graph and what one profiled inference saw. The inference is stopped
    after `limit_s` seconds, or as soon as `stop` is set (the job was cancelled); `on_run`
    is called as it starts (the session is made: the caller's progress says so)."""
    import onnx

    # ignore_cleanup_errors: a stopped session, kept (_keep_unclosed), holds its profile open
    with tempfile.TemporaryDirectory(prefix="opscope-graph-", ignore_cleanup_errors=True) as tmp:
        plan, optimized = saving_plan(config, tmp)
        try:
            sess, _ = create_session(path, build_options(plan), list(plan.providers))
        except Exception as exc:
            raise ModelError(one_line(exc), path) from exc
        if on_run is not None:
            on_run()
        since = interrupt.command_count()
        stopped = _guarded_run(sess, feeds, limit_s, stop, path, since)
        out = AsRun(None, sess.get_providers()[0])
        if stopped:  # no profile worth reading: the run did not end
            out.error = stopped
            if not interrupt.stopped(since):  # interrupted: `interrupt.calling` holds it
                _keep_unclosed(sess)  # (StoppableSession.run) to the command's os._exit
        else:
            profile = sess.end_profiling()
        del sess
        try:
            out.model = onnx.load(optimized, load_external_data=False)
        except Exception as exc:
            out.error = out.error or f"the optimized graph was not saved ({one_line(exc)})"
        if not stopped:
            _observed(profile, out)
    return out


def _guarded_run(
    sess: Any,
    feeds: Mapping[str, np.ndarray],
    limit_s: float | None,
    stop: threading.Event | None,
    path: str,
    since: int,
) -> str | None:
    """`sess`'s one inference, stopped between nodes after `limit_s` or once `stop` is
    set; None when it ended by itself, else why it was stopped (one line). `since`:
    `interrupt.command_count()` before it (a signal's stop is told from a failure by it)."""
    import onnxruntime as ort

    guarded = limit_s is not None or stop is not None
    if not guarded:
        options = stoppable_run_options()  # a signal stops it (engine/interrupt.py)
    else:  # its own: a signal stops it too (the guard below), and no other run is stopped
        options = ort.RunOptions()
        options.log_severity_level = 4  # its failure is said in one line, below
    ended, why = threading.Event(), []
    start = time.monotonic()

    def guard() -> None:
        while not ended.wait(0.05):
            if interrupt.received.is_set():
                pass  # the command or job was interrupted: its own line says so
            elif stop is not None and stop.is_set():
                why.append("the job was cancelled")
            elif limit_s is not None and time.monotonic() - start >= limit_s:
                why.append(f"the profiled inference was stopped after {limit_s:.0f} s")
            else:
                continue
            options.terminate = True
            return

    if guarded:
        threading.Thread(target=guard, name="opscope-graph-run-limit", daemon=True).start()
    try:
        sess.run(None, dict(feeds), options)
    except Exception as exc:
        if not why and interrupt.stopped(since):  # not a failure: its own line says so
            why.append(f"the profiled inference was {interrupt.reason()}")
        if not why:
            raise ModelError(f"an inference failed: {one_line(exc)}", path) from exc
    finally:
        ended.set()
    if not why:
        return None
    return (
        f"{why[0]}: no per-node times, providers or shapes as run (shown: the runtime's "
        "optimized graph, as saved before the run)"
    )


def _keep_unclosed(sess: Any) -> None:
    """`sess`, whose one run was stopped, is never destroyed: its destructor would write the
    profile of the run so far, which nothing reads, and free its events, about 50,000 a
    second of run up to ONNX Runtime's cap of 10^6 (1.7 GB), holding the GIL all along: 5-9 s
    on a busy machine before `opscope graph` said the run was stopped and could end, with no
    progress meanwhile. One reference it never drops keeps it to the process's end, the
    interpreter's teardown included, and the system takes its memory back then: the command
    ends, and the window's graph job process (engine/run/host_jobs.py), at once."""
    import ctypes

    ctypes.pythonapi.Py_IncRef(ctypes.py_object(sess))


def _observed(profile_path: str, out: AsRun) -> None:
    try:
        trace = parse_ort_profile(load_profile(profile_path))
    except (OSError, ValueError, ProfileFormatError) as exc:
        out.error = out.error or f"the profile could not be read: {one_line(exc)}"
        return
    if not trace.runs:
        return
    if out.model is None:
        return
    outputs = {
        n.name or f"{n.op_type}_{i}": [o for o in n.output if o]
        for i, n in enumerate(out.model.graph.node)
    }
    for ev in trace.run_nodes(trace.runs[-1].run_index):
        if ev.parent:
            continue
        out.providers[ev.name] = ev.provider
        out.order.append(ev.name)
        for name, (dtype, shape) in zip(outputs.get(ev.name, []), ev.output_shapes, strict=False):
            with contextlib.suppress(TypeError, ValueError):
                np_name = {"float": "float32", "double": "float64"}.get(dtype, dtype)
                out.tensors[name] = Tensor(np.dtype(np_name).name, tuple(int(d) for d in shape))
