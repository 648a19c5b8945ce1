"""The variant a config runs (INT8, fused...), built or taken from the cache by the
model's backend, for a job that measures or draws that variant rather than timing it
(the memory job, the graph view's job)."""

from __future__ import annotations

import dataclasses
from collections.abc import Generator

from engine import backends
from engine.events import Event, Notice, Progress, VariantReady
from engine.model.workload import Workload


def variant_for(
    workload: Workload, shapes: dict[str, tuple[int, ...]], seed: int = 0
) -> Generator[Event, None, VariantReady | None]:
    """Its progress and notices, then the variant of `workload`'s model at its config, at
    `shapes` (the last one built: an INT8 search's choice), or None when the config runs
    the model file as it is. The workload's inputs carry the window's (or the command
    line's) calibration and evaluation files, so the variant is the one the live run built
    from them, taken from the cache, not another made from random samples."""
    variant: VariantReady | None = None
    at = workload.with_inputs(dataclasses.replace(workload.inputs, shapes=dict(shapes)))
    gen = backends.backend_for(workload.config).prepare(backends.PrepareRequest(at, seed=seed))
    while True:
        try:
            ev = next(gen)
        except StopIteration as stop:
            stop.value.close()  # only the variant it built is wanted
            break
        if isinstance(ev, VariantReady):
            variant = ev
        elif isinstance(ev, Progress | Notice):
            yield ev
    return variant
