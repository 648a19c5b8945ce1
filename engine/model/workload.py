"""What a job runs (a Workload): the model file, the config it runs at, and its inputs
(what the window's Inputs panel shows), as the CLI takes them.

Every job request (a bench, a graph, a memory probe, a sweep, a tune and its trials, a gate
candidate, a generation, an LLM study) carries one Workload, and every command printed to
reproduce a result is made from it, so a trial never measures another shape than the one
on screen.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, replace
from typing import ClassVar

from engine.config import RunConfig
from engine.model.inputs import parse_dim_override, parse_shape_override

DATA_FILES = ("inputs_npz", "calibration_npz", "labels_npy", "tokenizer")  # the inputs' files


@dataclass(frozen=True)
class JobInputs:
    """The inputs a job runs on: shapes and dims, and the data files that give them."""

    local_files: ClassVar[tuple[str, ...]] = DATA_FILES  # names files on this machine
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)  # whole input shapes
    dims: dict[str, int] = field(default_factory=dict)  # symbolic dims by name: sequence=256
    inputs_npz: str | None = None  # evaluation data (a file or a folder)
    calibration_npz: str | None = None  # static INT8's samples
    labels_npy: str | None = None
    tokenizer: str | None = None  # a tokenizer.json for generated texts (None: beside the model)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> JobInputs:
        """From the CLI's knobs (--shape, --dim, --inputs, --calibration, --labels)."""
        return cls(
            shapes=dict(parse_shape_override(s) for s in getattr(args, "shape", [])),
            dims=dict(parse_dim_override(d) for d in getattr(args, "dim", [])),
            inputs_npz=getattr(args, "inputs", None),
            calibration_npz=getattr(args, "calibration", None),
            labels_npy=getattr(args, "labels", None),
            tokenizer=getattr(args, "tokenizer", None),
        )

    def argv(self, *, skip_dims: tuple[str, ...] = (), accuracy: bool = True) -> list[str]:
        """The flags that give a CLI command these inputs; `skip_dims` leaves out dims the
        command sets itself (a sweep's varied one); without `accuracy`, no labels."""
        out: list[str] = []
        for name, shape in self.shapes.items():
            out += ["--shape", f"{name}={'x'.join(str(d) for d in shape)}"]
        for name, size in self.dims.items():
            if name not in skip_dims:
                out += ["--dim", f"{name}={size}"]
        for flag, value in (
            ("--inputs", self.inputs_npz),
            ("--calibration", self.calibration_npz),
            ("--labels", self.labels_npy if accuracy else None),
            ("--tokenizer", self.tokenizer),
        ):
            if value:
                out += [flag, str(value)]
        return out


@dataclass(frozen=True)
class Workload:
    """What a job runs: the model file, the config it runs at, and its inputs."""

    # the fields that name files on this machine (a window on a host sends them first; the
    # inputs name their own)
    local_files: ClassVar[tuple[str, ...]] = ("model",)
    model: str
    config: RunConfig = field(default_factory=RunConfig)
    inputs: JobInputs = field(default_factory=JobInputs)

    @classmethod
    def from_args(cls, model: str, config: RunConfig, args: argparse.Namespace) -> Workload:
        """`model` at `config` on the CLI's inputs (--shape, --dim, --inputs, ...)."""
        return cls(model, config, JobInputs.from_args(args))

    def with_config(self, config: RunConfig) -> Workload:
        """The same model and inputs at another config."""
        return replace(self, config=config)

    def with_inputs(self, inputs: JobInputs) -> Workload:
        """The same model and config on other inputs."""
        return replace(self, inputs=inputs)
