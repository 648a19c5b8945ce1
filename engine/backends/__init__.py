"""The backends, found by name: each sub-folder of `engine/backends/` that exports
`BACKEND` is one engine. Adding an engine is adding a folder; nothing here names one.

Importing this package is cheap (no onnxruntime, no torch): each backend's `__init__`
declares its capabilities and imports its engine only inside `prepare` and `describe`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Generator
from functools import cache
from types import ModuleType
from typing import Any

from engine.backends.base import Backend, Capabilities, Prepared, PrepareRequest, ToOnnx
from engine.config import PRECISION_LABELS, RunConfig
from engine.errors import ConfigError
from engine.events import Event, drive
from engine.model.info import ModelInfo

__all__ = [
    "Backend",
    "Capabilities",
    "PrepareRequest",
    "Prepared",
    "all_backends",
    "backend_for",
    "describe_change",
    "describe_model",
    "exporter_for",
    "file_filter",
    "get",
    "memory_probe",
    "model_suffixes",
    "names",
    "onnx_exporters",
    "prepare",
]

DEFAULT = "onnxruntime"


def _packages() -> tuple[ModuleType, ...]:
    """Each backend folder's package, by folder name (cheap, see above; not cached here:
    the callers cache what they find)."""
    return tuple(
        importlib.import_module(f"{__name__}.{mod.name}")
        for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name)
        if mod.ispkg
    )


@cache
def all_backends() -> tuple[Backend, ...]:
    """Every backend, the default first, then by folder name."""
    found: list[Backend] = [
        b for m in _packages() if (b := getattr(m, "BACKEND", None)) is not None
    ]
    found.sort(key=lambda b: b.capabilities.name != DEFAULT)
    return tuple(found)


@cache
def onnx_exporters() -> tuple[ToOnnx, ...]:
    """What each backend package lends ONNX Runtime (`TO_ONNX`): its files exported to
    ONNX. Found as the backends are; nothing here names one."""
    return tuple(lent for m in _packages() if (lent := getattr(m, "TO_ONNX", None)) is not None)


def memory_probe(engine: str) -> Callable[..., Generator[Event, None, Any]] | None:
    """The memory probe the backend called `engine` lends (`MEMORY_PROBE`: a job run in a
    process of its own, engine/run/memory_job.py), or None: it has none."""
    return lent(engine, "MEMORY_PROBE")


def graph_as_run(engine: str) -> Callable[..., Any] | None:
    """What the backend called `engine` lends the graph view (`GRAPH_AS_RUN`: the graph it
    runs after its own fusion, engine/run/graph_job.py), or None: it has none."""
    return lent(engine, "GRAPH_AS_RUN")


def shape_inference() -> Callable[[Any], Any] | None:
    """A shape inference for ONNX models that some backend lends (`SHAPE_INFERENCE`: a model
    in, the model with shapes it could tell or None out), or None: none does."""
    for module in _packages():
        target = getattr(module, "SHAPE_INFERENCE", None)
        if target:
            return _load(target)
    return None


def lent(engine: str, what: str) -> Callable[..., Any] | None:
    """The function the backend called `engine` lends as `what` ("module:function")."""
    for module in _packages():
        backend = getattr(module, "BACKEND", None)
        target = getattr(module, what, None)
        if backend is not None and backend.capabilities.name == engine and target:
            return _load(target)
    return None


def _load(target: object) -> Callable[..., Any]:
    """The function a "module:function" names, imported."""
    name, func = str(target).split(":")
    fn: Callable[..., Any] = getattr(importlib.import_module(name), func)
    return fn


def exporter_for(path: str) -> ToOnnx | None:
    """The exporter that accepts `path`, if some backend lends one."""
    return next((e for e in onnx_exporters() if e.accepts(path)), None)


def names() -> tuple[str, ...]:
    return tuple(b.capabilities.name for b in all_backends())


def get(name: str) -> Backend:
    """The backend called `name`; a ConfigError listing the known ones otherwise."""
    for backend in all_backends():
        if backend.capabilities.name == name:
            return backend
    raise ConfigError(f"engine must be one of {', '.join(names())}; got {name!r}")


def backend_for(config: RunConfig) -> Backend:
    """The config's backend, having checked that it offers every knob value asked for."""
    backend = get(config.engine)
    backend.capabilities.check(config)
    return backend


def engine_for(path: str, asked: str) -> str:
    """`asked`, unless its backend cannot open `path` and another one can (a generating
    model's folder, which the default engine does not read)."""
    if get(asked).opens(path):
        return asked
    other = next((b for b in all_backends() if b.opens(path)), None)
    return other.capabilities.name if other is not None else asked


def prepare(req: PrepareRequest, on_event: Callable[[Event], object] | None = None) -> Prepared:
    """Prepare `req` on its backend at once, handing each event (progress, model facts,
    notices) to `on_event`: for callers that need no cancellation point."""
    prepared: Prepared = drive(backend_for(req.workload.config).prepare(req), on_event)
    return prepared


def describe_model(path: str) -> tuple[Backend, ModelInfo]:
    """The first backend that opens `path`, and the model's facts as it reads them; a file
    no backend claims goes to the default one, which says what is wrong with it."""
    backend = next((b for b in all_backends() if b.opens(path)), get(DEFAULT))
    return backend, backend.describe(path)


def model_suffixes() -> tuple[str, ...]:
    """Every model file suffix some backend runs, e.g. ('.onnx', '.pt2', '.pth', '.pt')."""
    seen: dict[str, None] = {}
    for backend in all_backends():
        seen.update(dict.fromkeys(backend.capabilities.suffixes))
    return tuple(seen)


def file_filter() -> str:
    """A Qt file-dialog filter: all models, then each backend's kind, then all files."""

    def globs(suffixes: tuple[str, ...]) -> str:
        return " ".join(f"*{s}" for s in suffixes)

    kinds = [
        f"{b.capabilities.file_kind} ({globs(b.capabilities.suffixes)})" for b in all_backends()
    ]
    return ";;".join([f"Models ({globs(model_suffixes())})", *kinds, "All files (*)"])


def describe_change(new: RunConfig, old: RunConfig) -> str:
    """A short label for what changed from `old`, e.g. 'INT8 dynamic, batch 8' or
    'PyTorch compiled, BF16' (each backend names its own modes)."""
    caps = get(new.engine).capabilities
    mark = caps.fusion_marks.get(new.fusion, f"fusion {new.fusion}")
    parts: list[str] = []
    fusion_said = False
    if new.engine != old.engine:
        parts.append(caps.label + (f" {mark}" if caps.mode_in_label else ""))
        fusion_said = caps.mode_in_label
    if new.precision != old.precision:
        parts.append(PRECISION_LABELS[new.precision])
    if new.fusion != old.fusion and not fusion_said:
        parts.append(mark)
    if new.batch != old.batch:
        parts.append(f"batch {new.batch}")
    if new.threads != old.threads:
        parts.append(f"threads {new.threads or 'default'}")
    if new.spinning != old.spinning:
        parts.append(f"spinning {'on' if new.spinning else 'off'}")
    if new.provider != old.provider:
        parts.append(f"provider {new.provider}")
    if new.min_cosine != old.min_cosine and new.precision.startswith("int8"):
        parts.append(f"min cosine {new.min_cosine:g}")
    return ", ".join(parts) or "no change"
