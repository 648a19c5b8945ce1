"""ONNX Runtime: runs ONNX models, and other backends' files exported to ONNX once (cached;
a PyTorch program, through the exporter the PyTorch backend lends: `engine.backends.base.ToOnnx`).

Declares what it offers here; onnxruntime is imported only by `prepare` and `describe`."""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

from engine.backends.base import Capabilities, Prepared, PrepareRequest, ToOnnx
from engine.backends.ort.variants import VARIANT_PARAMS
from engine.events import Event
from engine.model.info import ModelInfo


def _usable_providers() -> tuple[str, ...]:
    from engine.backends.ort.providers import usable_providers

    return usable_providers()


CAPABILITIES = Capabilities(
    name="onnxruntime",
    label="ONNX Runtime",
    suffixes=(".onnx",),
    file_kind="ONNX models",
    # each variant its module builds, and "int8": the fastest INT8 kind that meets the target
    precisions=("fp32", "fp16", "int8", *(p for p in VARIANT_PARAMS if p != "fp16")),
    fusions=("off", "basic", "extended", "layout", "all"),
    providers=("auto", "cpu", "cuda", "tensorrt"),
    fusion_labels={
        "off": "Off (no graph optimizations)",
        "basic": "Basic (constant folding, redundant nodes)",
        "extended": "Extended (+ operator fusions)",
        "layout": "Layout (+ layout transforms)",
        "all": "All (everything ONNX Runtime has)",
    },
    fusion_marks={f: f"fusion {f}" for f in ("off", "basic", "extended", "layout", "all")},
    nearest={"bf16": "fp16"},
    spinning=True,
    summary="ONNX Runtime runs ONNX models, and PyTorch files (.pt2, .pt) exported to ONNX.",
    fusion_help=(
        "ONNX Runtime graph optimization level: how much it fuses and rewrites the graph "
        "before running it."
    ),
    probe=_usable_providers,
)


# what one session holds and where load time goes (engine/run/memory_job.py runs it)
MEMORY_PROBE = "engine.backends.ort.memory_probe:probe_job"
# the graph it runs, after its fusion (engine/run/graph_job.py draws it)
GRAPH_AS_RUN = "engine.backends.ort.graph_as_run:as_run"
# shapes ONNX's inference cannot tell (engine/model/memory_need.py's sizes_at)
SHAPE_INFERENCE = "engine.backends.ort.shape_infer:symbolic_shapes"


class OrtBackend:
    capabilities = CAPABILITIES

    def opens(self, path: str) -> bool:
        return Path(path).suffix.lower() in CAPABILITIES.suffixes or _exporter(path) is not None

    def prepare(self, req: PrepareRequest) -> Generator[Event, None, Prepared]:
        from engine.backends.ort.backend import prepare

        prepared: Prepared = yield from prepare(req)
        return prepared

    def describe(self, path: str) -> ModelInfo:
        exporter = _exporter(path)
        if exporter is not None:  # described as its own backend reads it: nothing exported
            return exporter.describe(path)
        from engine.model.info import load_model

        return load_model(path)[1]


def _exporter(path: str) -> ToOnnx | None:
    """Another backend's file that ONNX Runtime runs exported (a PyTorch program)."""
    from engine.backends import exporter_for  # the registry, which imports this package

    return exporter_for(path)


BACKEND = OrtBackend()
