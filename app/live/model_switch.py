"""What a newly opened model runs with (no Qt): the FP32 defaults, or, when the user chose
to carry settings over, the current config; either way a line saying which settings
carried over or were left behind. Opening a CNN after an INT8-static, batch-4 transformer
must not quietly calibrate the CNN at batch 4."""

from __future__ import annotations

import dataclasses

from engine.api import RunConfig, backends


def config_for_new_model(current: RunConfig, carry: bool, path: str) -> tuple[RunConfig, str]:
    """The config to load `path` with, and what to tell the user ('' when nothing to say).
    The accuracy targets (the window's Min cosine and Min token agreement) always stay; the
    engine moves to one that opens the file when the current one cannot."""
    default = dataclasses.replace(
        RunConfig(),
        min_cosine=current.min_cosine,
        min_token_agreement=current.min_token_agreement,
    )
    config = current if carry else default
    if not backends.get(config.engine).opens(path):
        runs = next((b for b in backends.all_backends() if b.opens(path)), None)
        if runs is not None:
            config = runs.capabilities.fit(config)
    fitted_default = backends.get(config.engine).capabilities.fit(default)
    if current == default or current.resolved() == fitted_default.resolved():
        return config, ""
    changes = backends.describe_change(current, fitted_default)
    if carry:
        return config, f"carried over to the new model: {changes}"
    return config, (
        f"new model: FP32 defaults (left behind: {changes}; tick 'Carry settings to a new "
        "model' to keep them)"
    )
