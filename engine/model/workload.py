"""The inputs a job runs on (what the window's Inputs panel shows), as the CLI takes them.

Every job started from the window (a tune trial, a sweep, a gate candidate) and every
command it prints to reproduce a result carries these, so a trial never measures
another shape than the one on screen.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import ClassVar, Protocol, TypedDict

from engine.backends.base import DATA_FILES
from engine.model.inputs import parse_dim_override, parse_shape_override


class DataFiles(TypedDict):
    inputs_npz: str | None
    calibration_npz: str | None
    labels_npy: str | None
    tokenizer: str | None


class CarriesInputs(Protocol):
    """A job request that names its inputs as JobInputs does (the graph and memory jobs)."""

    @property
    def shapes(self) -> dict[str, tuple[int, ...]]: ...
    @property
    def dims(self) -> dict[str, int]: ...
    @property
    def inputs_npz(self) -> str | None: ...
    @property
    def calibration_npz(self) -> str | None: ...
    @property
    def labels_npy(self) -> str | None: ...
    @property
    def tokenizer(self) -> str | None: ...


@dataclass(frozen=True)
class JobInputs:
    local_files: ClassVar[tuple[str, ...]] = DATA_FILES
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)  # whole input shapes
    dims: dict[str, int] = field(default_factory=dict)  # symbolic dims by name: sequence=256
    inputs_npz: str | None = None  # evaluation data (a file or a folder)
    calibration_npz: str | None = None  # static INT8's samples
    labels_npy: str | None = None
    tokenizer: str | None = None  # a tokenizer.json for generated texts (None: beside the model)

    @classmethod
    def of(cls, req: CarriesInputs) -> JobInputs:
        """A request's shapes, dims and data files."""
        return cls(
            dict(req.shapes), dict(req.dims), req.inputs_npz, req.calibration_npz, req.labels_npy,
            req.tokenizer,
        )  # fmt: skip

    def data_files(self) -> DataFiles:
        """The data files as a request's keyword arguments (inputs_npz=...)."""
        return {
            "inputs_npz": self.inputs_npz,
            "calibration_npz": self.calibration_npz,
            "labels_npy": self.labels_npy,
            "tokenizer": self.tokenizer,
        }

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
