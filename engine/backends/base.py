"""What a backend declares and what it hands back.

A backend is one inference engine (ONNX Runtime, PyTorch, ...) in its own folder under
`engine/backends/`. It declares `Capabilities` (the knob values it offers, and where a
value it lacks goes) and prepares a `PrepareRequest` into a `Prepared`: one model, one
config, ready to run. The runner, the live engine host, the config panel and the CLI ask
a backend; nothing outside a backend's folder branches on an engine's name.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from engine.config import RunConfig
from engine.errors import ConfigError
from engine.events import Event
from engine.model.info import ModelInfo
from engine.model.inputs import Feeds
from engine.model.sample_axis import batch_of
from engine.model.workload import Workload

__all__ = ["Backend", "Capabilities", "Feeds", "PrepareRequest", "Prepared", "batch_of"]
KNOBS = ("precision", "fusion", "provider")


@dataclass(frozen=True)
class PrepareRequest:
    """What to prepare: the workload (the model, the config, where its inputs come from)."""

    workload: Workload
    seed: int = 0
    new_tokens: int | None = None  # a generating model: tokens per timed generation
    # build and check an INT8 variant at these shapes, not the run's: a sweep over sizes
    # builds one variant that serves all of them (None: at the run's own shapes)
    variant_shapes: dict[str, tuple[int, ...]] | None = None


@dataclass(frozen=True)
class Capabilities:
    """The knob values one backend offers, in the order a UI lists them, and the nearest
    equivalent of a value it lacks (`nearest`; otherwise its first choice)."""

    name: str  # the config's `engine` value, e.g. "onnxruntime"
    label: str  # "ONNX Runtime"
    suffixes: tuple[str, ...]  # the model files it runs natively, e.g. (".onnx",)
    file_kind: str  # what a file dialog calls them, e.g. "ONNX models"
    precisions: tuple[str, ...]
    fusions: tuple[str, ...]
    providers: tuple[str, ...]
    fusion_labels: Mapping[str, str]  # "all" -> "All (torch.compile)"
    fusion_marks: Mapping[str, str]  # how a fusion change reads on the curve: "compiled"
    nearest: Mapping[str, str] = field(default_factory=dict)
    spinning: bool = False  # whether intra-op spinning means anything here
    mode_in_label: bool = False  # "PyTorch compiled": the fusion is part of the engine's name
    requires: str | None = None  # a module that must be installed, e.g. "torch"
    install_hint: str = ""
    summary: str = ""  # what the engine runs, for a tooltip
    fusion_help: str = ""
    # the providers this machine has (cheap: no session opened); None: all of `providers`
    probe: Callable[[], tuple[str, ...]] | None = None

    def usable_providers(self) -> tuple[str, ...]:
        """The providers worth offering here, without "auto" (which picks among them)."""
        found = self.probe() if self.probe is not None else self.providers
        return tuple(p for p in found if p != "auto")

    def choices(self, knob: str) -> tuple[str, ...]:
        choices: tuple[str, ...] = getattr(self, knob + "s")
        return choices

    def fit(self, config: RunConfig) -> RunConfig:
        """`config` on this backend, each knob it lacks moved to its nearest equivalent."""
        changes: dict[str, Any] = {}
        if config.engine != self.name:
            changes["engine"] = self.name
        for knob in KNOBS:
            value, choices = getattr(config, knob), self.choices(knob)
            if value not in choices:
                near = self.nearest.get(value, choices[0])
                changes[knob] = near if near in choices else choices[0]
        return dataclasses.replace(config, **changes) if changes else config

    def check(self, config: RunConfig) -> None:
        """Refuse a knob value this backend does not have, saying what it has."""
        for knob in KNOBS:
            value, choices = getattr(config, knob), self.choices(knob)
            if value not in choices:
                raise ConfigError(
                    f"engine {self.name}: {knob} must be one of {', '.join(choices)}; got {value!r}"
                )

    def missing(self) -> str | None:
        """Why this backend cannot run here (a package not installed), or None."""
        if self.requires and importlib.util.find_spec(self.requires) is None:
            return f"needs {self.requires}: {self.install_hint}"
        return None


class Prepared(Protocol):
    """One model loaded on one config, inputs made, one inference checked: ready to run.

    `run_once()` is one timed inference on `feeds`; `run_batch(feeds)` one inference on any
    feeds of the model's signature (the serving loop stacks requests into one call) and
    returns the outputs as numpy arrays; `accuracy(generated)` compares with the FP32
    model; `profile(runs, timed_mean_ms)` is a separate profiling pass yielding OpProfile;
    `close()` frees what it holds."""

    config: RunConfig  # resolved: defaults made explicit
    feeds: Feeds

    @property
    def batch(self) -> int:
        """Samples per inference of `feeds`."""
        ...

    @property
    def provider_used(self) -> str:
        """The provider or device actually running it (what the engine reports)."""
        ...

    def make_feeds(self, index: int) -> Feeds: ...
    def run_once(self) -> object: ...
    def run_batch(self, feeds: Feeds) -> list[np.ndarray]: ...
    def accuracy(self, generated: bool) -> Iterator[Event]: ...
    def profile(self, runs: int, timed_mean_ms: float | None) -> Iterator[Event]: ...
    def close(self) -> None: ...


class Backend(Protocol):
    """One engine. Importing the module that declares it must stay cheap: heavy libraries
    are imported inside `prepare` and `describe`."""

    capabilities: Capabilities

    def opens(self, path: str) -> bool:
        """Whether this backend can run the model file at `path` (by its kind, not by
        running anything from it)."""
        ...

    def prepare(self, req: PrepareRequest) -> Generator[Event, None, Prepared]: ...

    def describe(self, path: str) -> ModelInfo:
        """The model's facts, read without running code from the file."""
        ...


class ToOnnx(Protocol):
    """A backend's files, exported to ONNX for ONNX Runtime to run (a backend package
    lends one as `TO_ONNX`; `engine.backends.onnx_exporters()` finds them): ONNX Runtime
    never imports another backend."""

    def accepts(self, path: str) -> bool:
        """Whether `path` is a file of this kind (by its name)."""
        ...

    def describe(self, path: str) -> ModelInfo:
        """The model's facts as its own backend reads them."""
        ...

    def export(
        self, path: str, batch: int, shapes: Mapping[str, tuple[int, ...]]
    ) -> Generator[Event, None, tuple[str, dict[str, Any]]]:
        """Progress, then the exported ONNX file's path and facts (`source`,
        `source_sha256`, ...); exported once, then cached."""
        ...


def feed_shapes(feeds: Feeds) -> dict[str, tuple[tuple[int, ...], str]]:
    """Each input's shape and dtype, as RunStarted records them."""
    return {k: (tuple(int(d) for d in a.shape), str(a.dtype)) for k, a in feeds.items()}
