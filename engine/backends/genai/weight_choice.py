"""The folder a generating model's precision runs: FP32's own, the FP16 build, or the
weight-only build that the search (weight_search.py) picks to meet the run's accuracy
target; each attempt built and cached (weights.py), scored against FP32 (agreement.py), and
the choice itself cached per model, precision, target, evaluation data and ONNX Runtime."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

from engine import cache
from engine.backends.genai.agreement import compared, data_id, reference_of
from engine.backends.genai.model import LLMConfig, open_llm
from engine.backends.genai.weight_search import WeightAttempt, search_weights, units
from engine.backends.genai.weight_target import LABELS, WeightTarget
from engine.backends.genai.weights import (
    WeightSettings,
    default_settings,
    llm_variant,
    variant_bytes,
)
from engine.config import RunConfig
from engine.events import Event, Progress
from engine.hostinfo import cpu_isa
from engine.model.info import files_sha256

CHOICE_VERSION = 1


def choose_weights(
    original: LLMConfig, config: RunConfig
) -> Generator[Event, None, tuple[Path, dict[str, Any]]]:
    """The folder to run and what building it took; a weight-only precision's details
    carry the search (`details["weights"]`: target, verdict line, every attempt)."""
    precision = config.precision
    start = default_settings(precision)
    if start is None:  # fp32, fp16: one build, judged after the timing
        return llm_variant(original, precision)
    import onnxruntime

    t0 = time.perf_counter()
    target = WeightTarget.of(config)
    digest = files_sha256([original.model_file])
    # the figures hang on the kernels too (accuracy level 4 quantizes activations in the
    # CPU's own way): the choice is remade on another instruction set or provider
    key = cache.cache_key({"model": digest, "precision": precision, "target": target.to_json(),
                           "data": data_id(), "ort": onnxruntime.__version__, "isa": cpu_isa(),
                           "provider": config.provider, "version": CHOICE_VERSION})  # fmt: skip
    hit = cache.cached_entry("llm-weight-choice", key)
    if hit is not None:
        weights = cache.read_meta(hit).get("weights")
        if isinstance(weights, dict) and isinstance(weights.get("settings"), dict):
            settings = WeightSettings.from_params(weights["settings"])
            folder, built = llm_variant(original, precision, settings, digest)
            return folder, {**built, "weights": {**weights, "cached": True}}
    label = LABELS[precision]
    fp32_config = dataclasses.replace(config, precision="fp32")
    yield Progress("accuracy", 0, None, "FP32's reference: greedy tokens and perplexity")
    ref = reference_of(open_llm(original.folder, fp32_config))

    def evaluate(s: WeightSettings) -> Generator[Event, None, WeightAttempt]:
        folder, built = llm_variant(original, precision, s, digest)
        yield Progress("accuracy", 0, None, f"{s.describe()} against FP32")
        a = compared(ref, open_llm(folder, config))
        extra = {
            "perplexity": a.perplexity,
            "perplexity_fp32": a.perplexity_fp32,
            "build_s": built.get("build_s"),
            "build_cached": bool(built.get("cached")),
        }
        size = variant_bytes(folder)
        return WeightAttempt(s, a.token_agreement, a.cosine_min, size, str(folder), extra)

    import onnx

    model = onnx.load(str(original.model_file), load_external_data=False)
    constants = {t.name for t in model.graph.initializer}
    names = [n.name for n in model.graph.node  # the MatMuls of a constant weight
             if n.op_type == "MatMul" and len(n.input) > 1 and n.input[1] in constants]  # fmt: skip
    choice = yield from search_weights(start, target, label, units(names), evaluate)
    details = {**choice.details(), "data": ref.data, "search_s": time.perf_counter() - t0}
    staging = cache.Staging("llm-weight-choice", key)
    staging.commit({"weights": details})
    chosen = choice.chosen
    folder, built = llm_variant(original, precision, chosen.settings, digest)  # a cache hit
    return folder, {**built, "build_s": details["search_s"], "cached": False,
                    "weights": {**details, "cached": False}}  # fmt: skip
