"""The space a tune searches: knob -> values, from `--space KNOB=V1,V2` or a default that
suits the engine and the machine, expanded into configs."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

from engine import backends
from engine.config import RunConfig
from engine.errors import ConfigError

KNOBS = ("engine", "precision", "fusion", "batch", "threads", "spinning")
Space = dict[str, list[Any]]


def parse_space(items: list[str]) -> Space:
    """`["precision=fp32,int8-dynamic", "batch=1,8"]` -> {"precision": [...], "batch": [1, 8]}.
    A ConfigError names an unknown knob or a value the knob cannot take."""
    space: Space = {}
    for item in items:
        knob, sep, values = item.partition("=")
        knob = knob.strip()
        if not sep or not values.strip():
            raise ConfigError(
                f"--space {item!r}: expected KNOB=V1,V2,... (knobs: {', '.join(KNOBS)})"
            )
        if knob not in KNOBS:
            raise ConfigError(
                f"--space {item!r}: unknown knob {knob!r} (knobs: {', '.join(KNOBS)})"
            )
        parsed = [_value(knob, v.strip(), item) for v in values.split(",") if v.strip()]
        space[knob] = list(dict.fromkeys(parsed))
    return space


def _value(knob: str, text: str, item: str) -> Any:
    if knob in ("batch", "threads"):
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(
                f"--space {item!r}: {knob} takes whole numbers, not {text!r}"
            ) from None
        low = 1 if knob == "batch" else 0
        if value < low:
            raise ConfigError(f"--space {item!r}: {knob} must be {low} or more, got {value}")
        return value
    if knob == "spinning":
        if text not in ("on", "off"):
            raise ConfigError(f"--space {item!r}: spinning takes on or off, not {text!r}")
        return text == "on"
    if knob == "engine" and text not in backends.names():
        raise ConfigError(
            f"--space {item!r}: unknown engine {text!r} ({', '.join(backends.names())})"
        )
    return text


def default_space(base: RunConfig) -> Space:
    """Precision x fusion, the values that matter on this engine: FP32 and both INT8s on a
    CPU (FP16 runs slower than FP32 there), with FP16 too on a GPU; no fusion against all."""
    caps = backends.get(base.engine).capabilities
    wanted = ["fp32", "int8-dynamic", "int8-static"]
    if base.provider in ("cuda", "tensorrt"):
        wanted.append("fp16")
    precisions = [p for p in wanted if p in caps.precisions]
    fusions: list[str] = [f for f in ("basic", "all") if f in caps.fusions]
    if not fusions:
        fusions = [str(f) for f in caps.fusions[:2]]
    return {"precision": precisions, "fusion": fusions}


def expand(space: Space, base: RunConfig) -> list[RunConfig]:
    """Every combination, as configs over `base`; ConfigError for values the engine lacks."""
    knobs = list(space)
    out: list[RunConfig] = []
    for combo in itertools.product(*(space[k] for k in knobs)):
        config = dataclasses.replace(base, **dict(zip(knobs, combo, strict=True)))
        caps = backends.get(config.engine).capabilities
        if config.precision not in caps.precisions:
            raise ConfigError(
                f"--space: engine {config.engine} has no precision {config.precision}"
            )
        if config.fusion not in caps.fusions:
            raise ConfigError(f"--space: engine {config.engine} has no fusion {config.fusion}")
        out.append(config)
    return out


def size(space: Space) -> int:
    n = 1
    for values in space.values():
        n *= len(values)
    return n
