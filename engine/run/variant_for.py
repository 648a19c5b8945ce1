"""The variant a config runs (INT8, fused...), built or taken from the cache by the
model's backend, for a job that measures or draws that variant rather than timing it
(the memory job, the graph view's job)."""

from __future__ import annotations

from collections.abc import Generator

from engine import backends
from engine.config import RunConfig
from engine.events import Event, Notice, Progress, VariantReady
from engine.run.job_inputs import JobInputs


def variant_for(
    model_path: str,
    config: RunConfig,
    shapes: dict[str, tuple[int, ...]],
    inputs: JobInputs,
    seed: int = 0,
) -> Generator[Event, None, VariantReady | None]:
    """Its progress and notices, then the variant (the last one built: an INT8 search's
    choice), or None when the config runs the model file as it is. `inputs` carries the
    window's (or the command line's) calibration and evaluation files, so the variant is the
    one the live run built from them, taken from the cache, not another made from random
    samples."""
    variant: VariantReady | None = None
    gen = backends.backend_for(config).prepare(
        backends.PrepareRequest(
            model_path,
            config,
            dict(shapes),
            dict(inputs.dims),
            inputs_npz=inputs.inputs_npz,
            calibration_npz=inputs.calibration_npz,
            labels_npy=inputs.labels_npy,
            tokenizer=inputs.tokenizer,
            seed=seed,
        )
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
