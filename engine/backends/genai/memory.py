"""Where a generating model's memory goes, measured in a process of its own (a clean
resident-memory baseline; engine/run/llm_memory.py runs it and writes the report):

- the weights by dtype, a weight-only variant's MatMulNBits packed weights counted as
  int4/int8 (not the uint8 they are stored in) and their scales and zero points apart;
- the KV cache per token of one sequence (OpenedLLM.kv_bytes_per_token: keys and values,
  every layer, in the element type the model declares);
- one prefill of the prompt and one decode step, on the decoder the timed runs use, the
  way the ONNX Runtime memory probe measures one inference (engine/backends/ort/
  memory_probe.py): the profiler's output sizes over the graph ONNX Runtime ran, as a
  liveness pass (the activation peak; the KV cache and the weights left out: they are
  counted apart), and the process's resident memory (psutil) before and after each phase
  with its high-water mark (Linux's VmHWM, reset before each phase) for the phase's peak."""

from __future__ import annotations

import contextlib
import re
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.backends.genai.model import OpenedLLM, open_llm
from engine.config import RunConfig
from engine.errors import ModelError, one_line
from engine.events import Event, Progress
from engine.model.graph_io import weights

if TYPE_CHECKING:
    import onnx

# quantized ops: (their bits' default, input index of the packed data, of the scales and zeros)
PACKED = {"MatMulNBits": (4, 1, (2, 3)), "GatherBlockQuantized": (4, 0, (2, 3))}


def llm_weights(model: onnx.ModelProto) -> list[tuple[str, str, float]]:
    """(name, dtype, bytes) of every weight, as engine/model/graph_io.py's `weights`, with a
    quantized op's packed data as "int4"/"int8" and its scales and zero points as
    "int4 scales"/"int8 scales" (a 4-bit weight stored as uint8 is not a uint8 weight)."""
    kind: dict[str, str] = {}
    for node in model.graph.node:
        if node.op_type not in PACKED:
            continue
        default, data, extra = PACKED[node.op_type]
        bits = next((a.i for a in node.attribute if a.name == "bits"), default)
        inputs = list(node.input)
        if data < len(inputs) and inputs[data]:
            kind[inputs[data]] = f"int{bits}"
        for i in extra:
            if i < len(inputs) and inputs[i]:
                kind.setdefault(inputs[i], f"int{bits} scales")
    return [(name, kind.get(name, dtype), size) for name, dtype, size in weights(model)]


def _rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def _reset_peak() -> bool:
    """Linux's resident high-water mark (VmHWM) reset to the current resident memory."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _peak() -> int | None:
    with contextlib.suppress(OSError, AttributeError):
        found = re.search(r"VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text())
        if found:
            return int(found.group(1)) * 1024
    return None


def probe_job(
    folder: str, config: RunConfig, prompt_len: int, new_tokens: int, seed: int
) -> Generator[Event, None, dict[str, Any]]:
    """One session of the folder's decoder, `config.batch` sequences: a prefill of
    `prompt_len` tokens, then one decode step; what each phase took, as plain data."""
    yield Progress("memory", 0, None, "measuring a prefill and a decode step")
    with tempfile.TemporaryDirectory(prefix="opscope-llm-mem-") as tmp:
        optimized = str(Path(tmp) / "optimized.onnx")
        rss = {"before_session": _rss()}
        llm = open_llm(folder, config, str(Path(tmp) / "profile"), optimized)
        rss["after_session"] = _rss()
        decoder = llm.decoder(config.batch, prompt_len + new_tokens)
        rng = np.random.default_rng(seed)
        size = (config.batch, prompt_len)
        prompt = rng.integers(llm.first_plain_token, llm.vocab_size, size=size, dtype=np.int64)
        phases: dict[str, dict[str, Any]] = {}
        logits = _phase(phases, "prefill", decoder.prefill, prompt)
        phases["prefill"].update(batch=config.batch, tokens=prompt_len, total=prompt_len)
        rss["after_prefill"] = _rss()
        yield Progress("memory", 1, None, "prefill measured; one decode step")
        _phase(phases, "decode", decoder.step, np.argmax(logits, axis=-1))
        phases["decode"].update(batch=config.batch, tokens=1, total=prompt_len + 1)
        rss["after_decode"] = _rss()
        trace_error = _as_run(llm, llm.session.end_profiling(), optimized, phases)
        result = {
            "provider_used": llm.provider_used,
            "session_s": llm.opened.create_s,
            "rss": rss,
            "phases": phases,
            "as_run_error": trace_error,
            "kv_bytes_per_token": llm.kv_bytes_per_token,
            "kv_dtype": _kv_dtype(llm),
            "kv_layout": {
                "layers": llm.shape.layers,
                "kv_heads": llm.shape.kv_heads,
                "head_size": llm.shape.head_size,
            },
            "cache_tokens": decoder.max_length,
            "context_length": llm.context_length,
        }
    return result


def _kv_dtype(llm: OpenedLLM) -> str:
    from engine.backends.genai.decoder import kv_dtype

    return kv_dtype(llm.session, llm.shape).name


def _phase(phases: dict[str, dict[str, Any]], name: str, run: Any, arg: np.ndarray) -> Any:
    """`run(arg)`, with the resident memory before and after it and its high-water mark."""
    before = _rss()
    reset = _reset_peak()
    try:
        out = run(arg)
    except ModelError:
        raise
    except Exception as exc:  # ORT's own error kinds
        raise ModelError(f"the {name} failed ({one_line(exc)})", "") from exc
    after = _rss()
    peak = _peak() if reset else None
    phases[name] = {
        "rss_before": before,
        "rss_after": after,
        "rss_growth": after - before,
        # the phase's resident peak above where it started (None: the peak could not be reset)
        "rss_peak_growth": max(peak - before, after - before) if peak is not None else None,
    }
    return out


def _as_run(llm: OpenedLLM, profile: str, optimized: str, phases: dict[str, Any]) -> str | None:
    """Each phase's activation peak from the profile (prefill is the first run, decode the
    second), as the ONNX Runtime probe finds one inference's; or why it could not be had."""
    import json

    from engine.backends.ort.memory_probe import Probe
    from engine.backends.ort.memory_probe import _as_run as nodes_as_run
    from engine.measure.liveness import liveness
    from engine.measure.op_trace import ProfileFormatError, parse_ort_profile

    try:
        trace = parse_ort_profile(json.loads(Path(profile).read_text()))
    except (OSError, ValueError, ProfileFormatError) as exc:
        return f"the profile could not be read: {one_line(exc)}"
    if len(trace.runs) < len(phases):
        return f"the profile holds {len(trace.runs)} runs, not {len(phases)}"
    shape = llm.shape
    cache = frozenset(
        t % layer
        for layer in range(shape.layers)
        for t in (shape.past_key, shape.past_value, shape.present_key, shape.present_value)
    )
    inputs = (shape.input_ids, shape.attention_mask)
    for index, name in enumerate(phases):
        p = Probe("", 0.0, None, None)
        nodes_as_run(optimized, [n for n in trace.run_nodes(index) if not n.parent], p)
        if p.as_run_error:
            return p.as_run_error
        ph = phases[name]
        sizes = {**p.observed, shape.input_ids: float(ph["batch"] * ph["tokens"] * 8),
                 shape.attention_mask: float(ph["batch"] * ph["total"] * 8)}  # fmt: skip
        ends = [o for n in p.as_run for o in n.outputs if o in p.graph_outputs]
        live = liveness(p.as_run, sizes, list(inputs), ends, weights=p.weights | cache)
        phases[name]["activations"] = live.to_json()
    return None
