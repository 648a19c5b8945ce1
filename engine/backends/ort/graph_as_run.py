"""The graph ONNX Runtime runs, for the graph view: the optimized model it saves after its
own fusion at the config's level and provider, and, from one profiled inference, the
dtype and shape of every tensor its nodes wrote (contrib ops such as Attention or
SkipLayerNormalization have no ONNX shape inference) and the provider each node ran on."""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.backends.ort.inference_session import (
    build_options,
    create_session,
    gpu_present,
    plan_session,
)
from engine.config import RunConfig
from engine.errors import ModelError, one_line
from engine.measure.op_trace import ProfileFormatError, parse_ort_profile
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


def as_run(path: str, config: RunConfig, feeds: Mapping[str, np.ndarray]) -> AsRun:
    import onnx

    with tempfile.TemporaryDirectory(prefix="opscope-graph-") as tmp:
        plan, optimized = saving_plan(config, tmp)
        try:
            sess, _ = create_session(path, build_options(plan), list(plan.providers))
        except Exception as exc:
            raise ModelError(one_line(exc), path) from exc
        try:
            sess.run(None, dict(feeds))
        except Exception as exc:
            raise ModelError(f"an inference failed: {one_line(exc)}", path) from exc
        out = AsRun(None, sess.get_providers()[0])
        profile = sess.end_profiling()
        del sess
        try:
            out.model = onnx.load(optimized, load_external_data=False)
        except Exception as exc:
            out.error = f"the optimized graph was not saved ({one_line(exc)})"
        _observed(profile, out)
    return out


def _observed(profile_path: str, out: AsRun) -> None:
    try:
        trace = parse_ort_profile(json.loads(Path(profile_path).read_text()))
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
