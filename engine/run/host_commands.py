"""The engine host's commands: small frozen dataclasses sent from the window to the host
process (as the events come back), so both sides name the same fields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.config import RunConfig


@dataclass(frozen=True)
class Load:
    """Load a model; with `config`, load it with that config (which becomes current)."""

    path: str
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    inputs_npz: str | None = None
    config: RunConfig | None = None
    dims: dict[str, int] = field(default_factory=dict)  # symbolic dims by name
    calibration_npz: str | None = None
    tokenizer: str | None = None  # a tokenizer.json for generated texts (None: beside it)


@dataclass(frozen=True)
class SetInputs:
    """The loaded model's input sizes (symbolic dims by name) and data files: rebuilt like
    Apply, a new run marked with `label`, when they change what runs."""

    dims: dict[str, int]
    inputs_npz: str | None
    calibration_npz: str | None
    label: str
    tokenizer: str | None = None


@dataclass(frozen=True)
class Apply:
    """Run the loaded model with this config (built while the old one keeps running)."""

    config: RunConfig


@dataclass(frozen=True)
class Start:
    """Resume timing: a new run of the config that was stopped."""


@dataclass(frozen=True)
class Stop:
    """End the running segment (its run is closed and recorded)."""


@dataclass(frozen=True)
class Profile:
    """A profiling pass of the running config, now."""


@dataclass(frozen=True)
class Cancel:
    """Stop building the config asked for last; the running one continues."""


@dataclass(frozen=True)
class Shutdown:
    """End the running segment and leave."""


@dataclass(frozen=True)
class GenerationShape:
    """A generating model's prompt and output lengths (tokens): rebuilt like Apply."""

    prompt_len: int
    new_tokens: int


@dataclass(frozen=True)
class RunJob:
    """Run a job (engine/run/jobs.py: a request dataclass) in a process of its own, or on
    the loaded model in the host; answered with JobUpdate events carrying `job_id`."""

    job_id: int
    request: Any


@dataclass(frozen=True)
class CancelJob:
    job_id: int


Command = (
    Load
    | Apply
    | Start
    | Stop
    | Profile
    | Cancel
    | Shutdown
    | GenerationShape
    | SetInputs
    | RunJob
    | CancelJob
)
