"""The variant a config runs (INT8, fused...), built or taken from the cache by the
model's backend, for a job that measures or draws that variant rather than timing it
(the memory job, the graph view's job)."""

from __future__ import annotations

from collections.abc import Generator

from engine import backends
from engine.config import RunConfig
from engine.events import Event, Notice, Progress, VariantReady


def variant_for(
    model_path: str,
    config: RunConfig,
    shapes: dict[str, tuple[int, ...]],
    dims: dict[str, int],
    seed: int = 0,
) -> Generator[Event, None, VariantReady | None]:
    """Its progress and notices, then the variant (the last one built: an INT8 search's
    choice), or None when the config runs the model file as it is."""
    variant: VariantReady | None = None
    gen = backends.backend_for(config).prepare(
        backends.PrepareRequest(model_path, config, dict(shapes), dict(dims), seed=seed)
    )
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
