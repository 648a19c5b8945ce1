"""Where the memory goes and where load time goes, as a job (engine/run/jobs.py):
`opscope memory MODEL` runs it, and so can the window.

Estimated from the graph: the weights by dtype (the variant run: FP32 to INT8 shows the
drop) and a liveness pass over one inference (engine/measure/liveness.py), as loaded (the
model file, ONNX shape inference at the run's shapes) and as run (the optimized graph the
runtime executes, in the order its profiler saw, at the sizes it saw). Measured beside
them, in a process of its own so that nothing before it skews the baseline: resident
memory before the session, after it, after the first inference and at steady state, and
the load broken down (file read and parse, variant build, session creation with the
runtime's own model-loading and initialization records, and on a GPU the weights' copy to
the device: bytes, time, GB/s). The report says how far the
estimate is from the measurement."""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any

from engine import backends
from engine.backends.genai.kv_dims import decoder_shapes
from engine.backends.genai.model import genai_folder
from engine.errors import ConfigError, OpScopeError
from engine.events import Event, Notice, Progress, VariantReady
from engine.measure.liveness import liveness, weights_by_dtype
from engine.model.graph_io import graph_nodes, weights
from engine.model.info import load_model
from engine.model.inputs import generate_inputs, plan_inputs
from engine.model.memory_need import sizes_at
from engine.run.memory_request import MemoryRequest, measured_apart, record
from engine.run.variant_for import variant_for

__all__ = ["MemoryRequest", "memory_job"]


def memory_job(req: MemoryRequest) -> Generator[Event, None, dict[str, Any]]:
    config = req.workload.config.resolved()
    probe = backends.memory_probe(config.engine)
    if probe is None:
        raise ConfigError(f"memory: the {config.engine} engine has no memory probe yet "
                          "(ONNX Runtime has)")  # fmt: skip
    if genai_folder(req.workload.model) is not None:
        from engine.run.llm_memory import llm_memory_job

        llm_report: dict[str, Any] = yield from llm_memory_job(req, config, probe)
        return llm_report
    yield Progress("memory", 0, 3, "reading the model")
    import onnx  # noqa: F401  (imported before the clock starts: the read is the file's)

    t0 = time.perf_counter()
    model, info = load_model(req.workload.model)
    read_s = time.perf_counter() - t0
    # a decoder's past KV inputs sized from the config beside it (a prefill from 0 past)
    from engine.backends.genai.backend import DEFAULT_PROMPT

    prompt = req.prompt_len or DEFAULT_PROMPT
    given = req.workload.inputs
    dims, shapes = decoder_shapes(info, config.batch, prompt, given.dims, given.shapes)
    plan = plan_inputs(info, config.batch, shapes, dims)
    feeds = generate_inputs(model, info, plan, req.seed)
    initializers = frozenset(t.name for t in model.graph.initializer)
    loaded = liveness(
        graph_nodes(model.graph),
        sizes_at(model, plan.shapes, backends.shape_inference()),
        [v.name for v in info.inputs],
        [o.name for o in model.graph.output],
        weights=initializers,
    )
    weights_loaded = weights(model)
    del model

    yield Progress("memory", 1, 3, f"the {config.precision} variant")
    variant = yield from variant_for(req.workload.with_config(config), plan.shapes, req.seed)
    variant_path = variant.path if variant is not None else req.workload.model
    run_weights = weights_loaded
    if variant_path != req.workload.model:
        try:
            run_model, _ = load_model(variant_path)
            run_weights = weights(run_model)
            del run_model
        except OpScopeError:
            pass

    yield Progress("memory", 2, 3, "measuring a session in a process of its own")
    measured = measured_apart(probe, (variant_path, config, feeds, req.runs))
    yield Progress("memory", 3, 3, "done")
    if measured.get("as_run_error"):
        yield Notice("info", f"memory: as run: {measured['as_run_error']}")
    report = _report(req, info.path, read_s, variant, loaded, weights_loaded, run_weights, measured)
    report["inputs"] = {k: list(v) for k, v in plan.shapes.items()}  # the shapes measured at
    if req.session:
        record(req, report)
    return report


def _report(
    req: MemoryRequest,
    path: str,
    read_s: float,
    variant: VariantReady | None,
    loaded: Any,
    weights_loaded: list[tuple[str, str, float]],
    run_weights: list[tuple[str, str, float]],
    measured: dict[str, Any],
) -> dict[str, Any]:
    by_dtype = weights_by_dtype([(d, b) for _, d, b in run_weights])
    w_total = sum(by_dtype.values())
    as_run = measured.get("as_run")
    peak = (as_run or {}).get("peak_bytes") or loaded.peak_bytes
    rss = measured.get("rss") or {}
    held = rss.get("steady", 0) - rss.get("before_session", 0)
    estimate = w_total + peak
    return {
        "model": path,
        "config": req.workload.config.resolved().to_json(),
        "provider_used": measured.get("provider_used"),
        "weights_bytes": {
            "total": w_total,
            "by_dtype": by_dtype,
            "as_loaded": weights_by_dtype([(d, b) for _, d, b in weights_loaded]),
        },
        "activations": {
            "as_loaded": loaded.to_json(),
            "as_run": as_run,
            "as_run_nodes": measured.get("as_run_nodes"),
        },
        "measured": {
            "rss_bytes": rss,
            "held_bytes": held,  # steady state minus before the session
            "estimate_bytes": estimate,  # weights run + activation peak
            "estimate_over_measured": estimate / held if held > 0 else None,
            # a GPU's memory (NVML) at the stages, where one runs the model: this process's
            # use of the device, or the device's used memory where NVML cannot tell
            "device": measured.get("device") or None,
        },
        "load": {
            "read_s": read_s,
            "variant_s": variant.build_s if variant else 0.0,
            "variant_cached": variant.cached if variant else True,
            "session_s": measured.get("session_s"),
            "model_loading_s": measured.get("model_loading_s"),
            "session_initialization_s": measured.get("session_initialization_s"),
            # on a GPU: the run's weights copied to the device by the runtime's own copy
            "weights_to_device": measured.get("weights_copy"),
        },
    }
