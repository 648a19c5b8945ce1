"""Runs onnxruntime-genai's model builder (as `python builder_run.py BUILDER-ARGS...`, in a
child process) with the fixes that real checkpoints need on today's transformers:

- Gemma 3 under transformers 5 keeps RoPE per layer type (`rope_parameters` =
  {"full_attention": {...}, "sliding_attention": {...}}); the builder's Gemma 3 path reads
  the flat form ({"rope_type": ...} and `rope_local_base_freq`) and stops with
  KeyError: 'rope_type'. Its Gemma 4 path reads the nested form; Gemma 3 gets the same
  reading here: the global layers' parameters flat, the sliding layers' theta as the local
  one. The weights are loaded by transformers itself from the folder, so only the builder's
  view of the config changes.

This file imports nothing from OpScope: it runs under the same interpreter as a script."""

from __future__ import annotations

import runpy
import sys
from typing import Any

FULL, SLIDING = "full_attention", "sliding_attention"


def flatten_layer_rope(config: Any) -> None:
    """Gemma 3's per-layer-type RoPE as the flat form the builder reads (in place)."""
    params = getattr(config, "rope_parameters", None)
    if not isinstance(params, dict) or "rope_type" in params or FULL not in params:
        return
    full = dict(params[FULL])
    local = dict(params.get(SLIDING, full))
    if local.get("rope_type", "default") != "default":
        raise SystemExit(
            f"Error: sliding-window RoPE of type {local['rope_type']!r} is not supported by "
            "the onnxruntime-genai builder (it builds default RoPE on Gemma 3's local layers)"
        )
    full.setdefault("rope_type", "default")
    config.rope_parameters = full
    config.rope_theta = full.get("rope_theta", getattr(config, "rope_theta", 10000.0))
    config.rope_local_base_freq = local.get("rope_theta", 10000.0)


def _patch_gemma3() -> None:
    import onnxruntime_genai.models  # noqa: F401  (puts the builder's folder on sys.path)
    from builders import gemma

    original = gemma.Gemma3Model.__init__

    def init(self: Any, config: Any, *args: Any, **kwargs: Any) -> None:
        if type(self) is gemma.Gemma3Model:  # Gemma 4 reads the nested form itself
            flatten_layer_rope(config)
        original(self, config, *args, **kwargs)

    gemma.Gemma3Model.__init__ = init


def main() -> None:
    _patch_gemma3()
    sys.argv = ["onnxruntime_genai.models.builder", *sys.argv[1:]]
    runpy.run_module("onnxruntime_genai.models.builder", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
