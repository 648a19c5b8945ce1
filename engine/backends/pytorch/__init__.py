"""PyTorch: runs a PyTorch file (.pt2 program, TorchScript) natively, eager or compiled.

Declares what it offers here; torch is imported only by `prepare` and `describe`."""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any

from engine.backends.base import Capabilities, Prepared, PrepareRequest
from engine.backends.pytorch.load import TORCH_SUFFIXES, is_torch_file
from engine.events import Event
from engine.model.info import ModelInfo

CAPABILITIES = Capabilities(
    name="torch",
    label="PyTorch",
    suffixes=TORCH_SUFFIXES,
    file_kind="PyTorch programs",
    precisions=("fp32", "bf16", "fp16", "int8-dynamic"),
    fusions=("off", "all"),
    providers=("auto", "cpu", "cuda"),
    fusion_labels={"off": "Off (eager)", "all": "All (torch.compile)"},
    fusion_marks={"off": "eager", "all": "compiled"},
    nearest={
        "int8": "int8-dynamic",
        "int8-static": "int8-dynamic",
        "basic": "all",
        "extended": "all",
        "layout": "all",
        "tensorrt": "cuda",
    },
    spinning=False,
    mode_in_label=True,
    requires="torch",
    install_hint="pip install 'opscope[torch]'",
    summary=(
        "PyTorch runs a PyTorch file natively: eager (fusion off) or torch.compile (fusion all)."
    ),
    fusion_help=(
        "PyTorch: Off runs the module eagerly, All compiles it with torch.compile (the "
        "first inference compiles, which can take a while)."
    ),
)


class TorchBackend:
    capabilities = CAPABILITIES

    def opens(self, path: str) -> bool:
        return is_torch_file(path)

    def prepare(self, req: PrepareRequest) -> Generator[Event, None, Prepared]:
        from engine.backends.pytorch.backend import prepare_torch

        prepared: Prepared = yield from prepare_torch(req)
        return prepared

    def describe(self, path: str) -> ModelInfo:
        from engine.backends.pytorch.backend import describe_torch
        from engine.backends.pytorch.load import load_torch

        return describe_torch(load_torch(path))


class TorchToOnnx:
    """PyTorch files exported to ONNX once (cached), for ONNX Runtime to run."""

    def accepts(self, path: str) -> bool:
        return is_torch_file(path)

    def describe(self, path: str) -> ModelInfo:
        return BACKEND.describe(path)

    def export(
        self, path: str, batch: int, shapes: Mapping[str, tuple[int, ...]]
    ) -> Generator[Event, None, tuple[str, dict[str, Any]]]:
        from engine.backends.pytorch.to_onnx import onnx_for_torch

        return (yield from onnx_for_torch(path, batch, shapes))


BACKEND = TorchBackend()
TO_ONNX = TorchToOnnx()
