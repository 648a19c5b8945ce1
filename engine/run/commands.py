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


@dataclass(frozen=True)
class SetInputs:
    """The loaded model's input sizes (symbolic dims by name) and data files: rebuilt like
    Apply, a new run marked with `label`, when they change what runs."""

    dims: dict[str, int]
    inputs_npz: str | None
    calibration_npz: str | None
    label: str


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
class ServeLoad:
    """Serve the loaded model under open-loop traffic (the serving loop), timing paused;
    a run of kind load. `batching` is `BatchPolicy.to_json()`."""

    traffic: str  # a spec: poisson:RATE, bursts:BASE,PEAK,PERIOD_S,DUTY, ...
    batching: dict[str, Any]
    duration_s: float = 10.0
    cache: int = 0
    repeat: float = 0.0
    warmup_s: float = 1.0
    seed: int = 0


@dataclass(frozen=True)
class StopLoad:
    """Stop sending; the requests already sent are served and the run is recorded."""


@dataclass(frozen=True)
class Calibrate:
    """Time batches up to `max_batch` with `instances` running at once, for the What-if
    simulator (cached per model, config and machine); answered with a Calibrated event."""

    max_batch: int
    instances: int = 1
    remeasure: bool = False  # measure again even when a calibration is cached


@dataclass(frozen=True)
class GenerationShape:
    """A generating model's prompt and output lengths (tokens): rebuilt like Apply."""

    prompt_len: int
    new_tokens: int


@dataclass(frozen=True)
class RunJob:
    """Run a job (engine/run/jobs.py: a request dataclass) in a process of its own;
    answered with JobUpdate events carrying `job_id`."""

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
    | ServeLoad
    | StopLoad
    | Calibrate
    | GenerationShape
    | SetInputs
    | RunJob
    | CancelJob
)
