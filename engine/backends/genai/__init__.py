"""Generating models (LLMs) in onnxruntime-genai's folder format (genai_config.json, an ONNX
decoder with past_key_values inputs, tokenizer.json), run on ONNX Runtime with the KV cache
in a preallocated shared buffer: one timed run is one whole generation (prefill, then one
token per step). `opscope generate` times them in detail (TTFT, TPOT, phases); here they
are a backend like the others, for `bench`, the live app and sessions.

Declares what it offers; onnxruntime is imported only by `prepare` and `describe`."""

from __future__ import annotations

from collections.abc import Generator

from engine.backends.base import Capabilities, Prepared, PrepareRequest
from engine.backends.genai.model import genai_folder
from engine.events import Event
from engine.model.info import ModelInfo

CAPABILITIES = Capabilities(
    name="genai",
    label="ONNX Runtime (generation)",
    suffixes=("genai_config.json",),  # the folder, or this file in it (file dialogs)
    file_kind="generating models (genai_config.json folders)",
    precisions=("fp32", "fp16", "int8-weights", "int4-weights"),
    fusions=("basic", "extended", "all"),
    providers=("auto", "cpu", "cuda"),
    fusion_labels={
        "basic": "Basic (constant folding, redundant nodes)",
        "extended": "Extended (+ operator fusions)",
        "all": "All (everything ONNX Runtime has)",
    },
    fusion_marks={f: f"fusion {f}" for f in ("basic", "extended", "all")},
    nearest={
        "int8": "int8-weights",
        "int8-dynamic": "int8-weights",
        "int8-static": "int8-weights",
        "bf16": "fp32",
        "off": "basic",
        "layout": "all",
        "tensorrt": "cuda",
    },
    spinning=True,
    summary="generating models (onnxruntime-genai folders): one run is a whole generation, "
    "prefill then decode, with the KV cache in a shared buffer",
    fusion_help="ONNX Runtime graph optimization level of the decoder.",
)

# a prefill and a decode step measured, in a process of its own (engine/run/llm_memory.py)
MEMORY_PROBE = "engine.backends.genai.memory:probe_job"


class GenaiBackend:
    capabilities = CAPABILITIES

    def opens(self, path: str) -> bool:
        return genai_folder(path) is not None

    def prepare(self, req: PrepareRequest) -> Generator[Event, None, Prepared]:
        from engine.backends.genai.backend import prepare

        prepared: Prepared = yield from prepare(req)
        return prepared

    def describe(self, path: str) -> ModelInfo:
        import dataclasses

        from engine.backends.genai.model import read_config
        from engine.model.info import load_model

        config = read_config(path)
        _, info = load_model(config.model_file)
        return dataclasses.replace(info, path=str(config.folder))


BACKEND = GenaiBackend()
