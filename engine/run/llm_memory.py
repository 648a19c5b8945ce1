"""The memory job for a generating model (`opscope memory FOLDER`, the window's Memory dock
on a genai folder): the weights by dtype of the precision run (a weight-only variant's
packed weights as int4/int8), the KV cache per token, per sequence at the run's prompt +
new tokens and at the model's full context, for batch 1 and the run's batch, and a
prefill and a decode step measured in a process of its own (engine/backends/genai/
memory.py: their activation peaks and the resident memory they took).

The report has the keys every memory report has (engine/run/memory_job.py: the printer,
the session file and the report read them), "activations.as_run" being the prefill's
liveness, and an "llm" section with the rest."""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import Any

from engine.backends.genai.backend import DEFAULT_NEW_TOKENS, DEFAULT_PROMPT
from engine.backends.genai.memory import llm_weights
from engine.backends.genai.model import read_config
from engine.backends.genai.weight_choice import choose_weights
from engine.config import RunConfig
from engine.errors import ConfigError, OpScopeError
from engine.events import Event, Notice, Progress, VariantReady
from engine.measure.liveness import weights_by_dtype
from engine.model.info import load_model
from engine.run.memory_request import MemoryRequest, measured_apart, record

MEASURED_BY = (
    "activation peaks: ONNX Runtime's profiler, each output's size over the graph it ran, "
    "in a liveness pass (KV cache and weights apart); resident: the process's RSS before "
    "and after each phase, its peak from Linux's VmHWM reset before it"
)


def llm_memory_job(
    req: MemoryRequest, config: RunConfig, probe: Any
) -> Generator[Event, None, dict[str, Any]]:
    yield Progress("memory", 0, 3, "reading the model")
    import onnx  # noqa: F401  (imported before the clock starts: the read is the file's)

    t0 = time.perf_counter()
    llm = read_config(req.workload.model)
    model, info = load_model(llm.model_file)
    read_s = time.perf_counter() - t0
    weights_loaded = llm_weights(model)
    del model
    prompt_len, new_tokens = _lengths(req, llm.shape.input_ids)
    if prompt_len + new_tokens > llm.context_length:
        raise ConfigError(
            f"{prompt_len} prompt + {new_tokens} new tokens = {prompt_len + new_tokens} exceed "
            f"the model's context of {llm.context_length} tokens"
        )

    yield Progress("memory", 1, 3, f"the {config.precision} weights")
    folder, built = yield from choose_weights(llm, config)  # the build a run of it runs
    variant = VariantReady(config.precision, str(folder), float(built.get("build_s", 0.0)),
                           bool(built.get("cached")), info.nodes, details=built)  # fmt: skip
    yield variant
    run_weights = weights_loaded
    if folder != llm.folder:
        try:
            run_model, _ = load_model(folder / llm.model_file.name)
            run_weights = llm_weights(run_model)
            del run_model
        except OpScopeError:
            pass

    yield Progress("memory", 2, 3, "a prefill and a decode step in a process of its own")
    measured = measured_apart(probe, (str(folder), config, prompt_len, new_tokens, req.seed))
    yield Progress("memory", 3, 3, "done")
    if measured.get("as_run_error"):
        yield Notice("info", f"memory: activations: {measured['as_run_error']}")
    report = _report(config, str(llm.folder), read_s, variant, weights_loaded, run_weights,
                     measured, prompt_len, new_tokens)  # fmt: skip
    if req.session:
        record(req, report)
    return report


def _lengths(req: MemoryRequest, input_ids: str) -> tuple[int, int]:
    """The prompt's length (asked, or --shape input_ids=BxL's, or the default) and the new
    tokens'."""
    shape = req.workload.inputs.shapes.get(input_ids)
    if req.prompt_len is not None:
        prompt = req.prompt_len
    elif shape is not None:
        if len(shape) != 2 or min(shape) < 1:
            raise ConfigError(f"--shape {input_ids}: BATCHxLENGTH, got {shape}")
        prompt = int(shape[1])
    else:
        prompt = DEFAULT_PROMPT
    new = req.new_tokens or DEFAULT_NEW_TOKENS
    if prompt < 1 or new < 1:
        raise ConfigError(f"prompt and new tokens must be at least 1, got {prompt} and {new}")
    return prompt, new


def kv_rows(per_token: int, run_tokens: int, context: int, batches: list[int]) -> list[Any]:
    """The KV cache of `batches` sequences: per token, at the run's length, at full context."""
    return [
        {
            "batch": b,
            "per_token": b * per_token,
            "per_sequence": b * per_token * run_tokens,
            "full_context": b * per_token * context,
        }
        for b in batches
    ]


def _report(
    config: RunConfig,
    folder: str,
    read_s: float,
    variant: VariantReady,
    weights_loaded: list[tuple[str, str, float]],
    run_weights: list[tuple[str, str, float]],
    m: dict[str, Any],
    prompt_len: int,
    new_tokens: int,
) -> dict[str, Any]:
    by_dtype = weights_by_dtype([(d, b) for _, d, b in run_weights])
    w_total = sum(by_dtype.values())
    per_token = int(m["kv_bytes_per_token"])
    run_tokens = prompt_len + new_tokens
    batches = sorted({1, config.batch})
    phases: dict[str, Any] = m.get("phases") or {}
    prefill, decode = phases.get("prefill") or {}, phases.get("decode") or {}
    peaks = [float((p.get("activations") or {}).get("peak_bytes") or 0) for p in (prefill, decode)]
    rss = m.get("rss") or {}
    held = rss.get("after_decode", 0) - rss.get("before_session", 0)
    kv_run = config.batch * per_token * run_tokens
    estimate = w_total + kv_run + max(peaks)
    return {
        "model": folder,
        "config": config.to_json(),
        "provider_used": m.get("provider_used"),
        "weights_bytes": {
            "total": w_total,
            "by_dtype": by_dtype,
            "as_loaded": weights_by_dtype([(d, b) for _, d, b in weights_loaded]),
        },
        "activations": {
            "as_loaded": None,
            "as_run": prefill.get("activations"),  # the prefill's: the larger of the two
            "as_run_nodes": len((prefill.get("activations") or {}).get("timeline") or []),
        },
        "measured": {
            "rss_bytes": rss,
            "held_bytes": held,  # after the decode step minus before the session
            "estimate_bytes": estimate,  # weights + the run's KV cache + the larger peak
            "estimate_over_measured": estimate / held if held > 0 else None,
            "device": None,
        },
        "load": {
            "read_s": read_s,
            "variant_s": variant.build_s,
            "variant_cached": variant.cached or config.precision == "fp32",
            "session_s": m.get("session_s"),
            "model_loading_s": None,
            "session_initialization_s": None,
            "weights_to_device": None,
        },
        "inputs": {"input_ids": [config.batch, prompt_len]},
        "llm": {
            "prompt_len": prompt_len,
            "new_tokens": new_tokens,
            "context_length": int(m["context_length"]),
            "kv_cache": {
                "dtype": m.get("kv_dtype"),
                **(m.get("kv_layout") or {}),  # layers, kv_heads, head_size
                "bytes_per_token": per_token,  # one sequence, keys and values, every layer
                "run_tokens": run_tokens,
                "cache_tokens": m.get("cache_tokens"),  # the buffer the decoder allocates
                "by_batch": kv_rows(per_token, run_tokens, int(m["context_length"]), batches),
            },
            "phases": {name: _phase(p) for name, p in phases.items()},
            "measured_by": MEASURED_BY,
        },
    }


def _phase(p: dict[str, Any]) -> dict[str, Any]:
    """A phase's figures (its liveness without the per-node timeline: the prefill's is the
    report's `activations.as_run`)."""
    live = p.get("activations") or {}
    return {
        "batch": p.get("batch"),
        "tokens": p.get("tokens"),
        "activation_peak_bytes": live.get("peak_bytes"),
        "at_node": live.get("at_node"),
        "alive_at_peak": (live.get("alive_at_peak") or [])[:5],
        "unknown_tensors": live.get("unknown_tensors"),
        "rss_growth_bytes": p.get("rss_growth"),
        "rss_peak_growth_bytes": p.get("rss_peak_growth"),
    }
