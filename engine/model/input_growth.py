"""Generated inputs the model rejects at run time, retried larger: a default length of 16
is too short for a model that frames audio with a 400-sample window, or pads by more than
its input. Only dims the user did not set grow, doubling, one at a time and then
together, within a bound on sizes, tries and time; the size that ran is said.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from engine.model.info import ModelInfo
from engine.model.inputs import InputPlan, plan_inputs

DIM_LIMIT = 1 << 16  # no dim grows past this
ELEMENT_LIMIT = 1 << 26  # nor the inputs past this many elements in all (256 MB of float32)
MAX_TRIES = 40
BUDGET_S = 30.0


@dataclass(frozen=True)
class Grown:
    """The first plan the model accepted, and what it took."""

    plan: InputPlan
    sizes: dict[str, int]  # label -> the size that ran
    rejected: tuple[str, ...]  # "samples=32", ... tried before it

    def note(self, first_reason: str, before: InputPlan) -> str:
        was = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        tried = f"; {', '.join(self.rejected)} failed too" if self.rejected else ""
        flags = " ".join(
            f"--shape {name}={'x'.join(map(str, shape))}"
            for name, shape in self.plan.shapes.items()
            if before.shapes.get(name) != shape
        )
        return (
            f"generated inputs grown to {was}: the model rejected the default sizes "
            f"({first_reason}){tried}; to choose them yourself: {flags}"
        )


def grow(
    info: ModelInfo,
    plan: InputPlan,
    batch: int,
    overrides: Mapping[str, tuple[int, ...]],
    rejects: Callable[[InputPlan], str | None],
    *,
    clock: Callable[[], float] = time.monotonic,
) -> Grown | None:
    """Larger plans until `rejects(plan)` says None (the model ran them); None when no
    size within the bounds runs."""
    deadline = clock() + BUDGET_S
    rejected: list[str] = []
    for sizes in _candidates(plan.defaulted):
        if len(rejected) >= MAX_TRIES or clock() > deadline:
            return None
        candidate = plan_inputs(info, batch, overrides, sizes)
        elements = sum(math.prod(s) for s in candidate.shapes.values())
        if elements > ELEMENT_LIMIT:
            continue
        if rejects(candidate) is None:
            return Grown(candidate, dict(sizes), tuple(rejected))
        rejected.append(", ".join(f"{k}={v}" for k, v in sizes.items()))
    return None


def _candidates(defaulted: Mapping[str, int]) -> Iterator[dict[str, int]]:
    """Each dim doubled alone (up to DIM_LIMIT), then all of them doubled together."""
    labels = [k for k, v in defaulted.items() if v > 0]
    for label in labels:
        size = defaulted[label] * 2
        while size <= DIM_LIMIT:
            yield {label: size}
            size *= 2
    if len(labels) > 1:
        factor = 2
        while any(defaulted[k] * factor <= DIM_LIMIT for k in labels):
            yield {k: min(defaulted[k] * factor, DIM_LIMIT) for k in labels}
            factor *= 2
