"""What every timed use of a generating model starts with (`opscope generate`, and the
backend that `bench`, `profile` and the live app use): the folder read, its precision's
weights built (cached) and opened, and the run's facts once the prompt is known."""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from pathlib import Path

from engine.backends.genai.model import LLMConfig, OpenedLLM, open_llm, read_config
from engine.backends.genai.weight_choice import choose_weights
from engine.config import RunConfig
from engine.errors import ConfigError
from engine.events import (
    Event,
    GenerationStarted,
    ModelLoaded,
    Progress,
    RunStarted,
    VariantReady,
)
from engine.model.info import load_model


def open_variant(
    model_path: str, config: RunConfig
) -> Generator[Event, None, tuple[OpenedLLM, LLMConfig, Path]]:
    """Yields ModelLoaded and VariantReady; returns the opened model (its session's notes in
    `llm.notes`, said by the caller once its own checks pass), the original's config and
    the folder run (a weight-only variant's, or the original)."""
    original = read_config(model_path)
    yield Progress("load", 0, None, f"loading {original.folder.name}")
    _, info = load_model(original.model_file)
    yield ModelLoaded(dataclasses.replace(info, path=str(original.folder)))
    if config.precision != "fp32":
        yield Progress("variant", 0, None, f"building the {config.precision} model")
    folder, built = yield from choose_weights(original, config)
    yield VariantReady(config.precision, str(folder), float(built.get("build_s", 0.0)),
                       bool(built.get("cached")), info.nodes, details=built)  # fmt: skip
    llm = open_llm(folder, config)
    if config.precision == "fp16" and "CPU" in llm.provider_used:
        llm.notes.append(
            "fp16 on the CPU halves the weights' and the KV cache's bytes, but ONNX Runtime "
            "has no fast fp16 arithmetic on x86 CPUs: expect FP32's speed or slower; fp16 "
            "pays on a GPU (--provider cuda)"
        )
    return llm, original, folder


def check_context(llm: OpenedLLM, prompt_len: int, new_tokens: int) -> None:
    length = prompt_len + new_tokens
    if length > llm.context_length:
        raise ConfigError(
            f"{prompt_len} prompt + {new_tokens} new tokens = {length} exceed the model's "
            f"context of {llm.context_length} tokens"
        )


def run_facts(
    llm: OpenedLLM, config: RunConfig, batch: int, prompt_len: int, new_tokens: int,
    sampling: str,
) -> list[Event]:  # fmt: skip
    """RunStarted and GenerationStarted of a run of `batch` sequences of `prompt_len`."""
    opened = llm.opened
    return [
        RunStarted(
            config.resolved(),
            opened.requested,
            opened.provider_used,
            opened.providers_obtained,
            {llm.shape.input_ids: ((batch, prompt_len), "int64")},
            batch,
            opened.create_s,
        ),
        GenerationStarted(
            prompt_len,
            new_tokens,
            batch,
            sampling,
            llm.context_length,
            llm.kv_bytes_per_token,
        ),
    ]
