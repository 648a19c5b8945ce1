"""The engine host's commands: small frozen dataclasses sent from the window to the host
process (as the events come back), so both sides name the same fields."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.config import RunConfig


@dataclass(frozen=True)
class Load:
    """Load a model; with `config`, load it with that config (which becomes current)."""

    path: str
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    inputs_npz: str | None = None
    config: RunConfig | None = None


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


Command = Load | Apply | Start | Stop | Profile | Cancel | Shutdown
