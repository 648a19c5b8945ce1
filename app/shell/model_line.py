"""The inputs line under the model's name in the Configuration panel, made once from the
inputs' descriptions (plain Python, no Qt: tested on its own).

A generating model feeds its KV cache as two inputs per layer (past_key_values.0.key,
past_key_values.0.value, ... 60 of them for a 30-layer model): those read as one item,
"30 layers' KV cache", and the inputs whose sizes follow the prompt (attention_mask) by
name; the full list goes in the tooltip. Other models' inputs read as before: inputs that
differ only by their numbers once, with a count."""

from __future__ import annotations

import re
from collections.abc import Sequence

# past_key_values.3.key, past.3.value, present_key_3, past_key_values.3.key_cache ...
_KV = re.compile(r"^(?:past|cache)[^\d]*?(\d+)[^\d]*?(key|value)\b", re.IGNORECASE)


def kv_layer(name: str) -> int | None:
    """The layer of a past-KV input ('past_key_values.7.value' -> 7); None for the others."""
    m = _KV.match(name)
    return int(m.group(1)) if m else None


def collapsed(items: Sequence[str]) -> list[str]:
    """Inputs that differ only by their numbers shown once:
    'past_key_values.*.key float32[...] (x4)'."""
    groups: dict[str, list[str]] = {}
    for item in items:
        groups.setdefault(re.sub(r"\.\d+\.", ".*.", item, count=1), []).append(item)
    return [v[0] if len(v) == 1 else f"{k} (x{len(v)})" for k, v in groups.items()]


def inputs_line(names: Sequence[str], described: Sequence[str]) -> str:
    """One line for the inputs `names`, each described in `described` (the same order:
    'input_ids 1x128, default size', 'attention_mask int64[batch_size, ...]').

    With past-KV inputs (two or more layers'): 'input_ids 1x128, attention_mask, 30 layers'
    KV cache'; without: every input, numbered ones collapsed (`collapsed`)."""
    layers = {layer for n in names if (layer := kv_layer(n)) is not None}
    if len(layers) < 2 or len(names) != len(described):
        return ", ".join(collapsed(described))
    parts: list[str] = []
    kv = f"{len(layers)} layers' KV cache"
    for name, text in zip(names, described, strict=True):
        if kv_layer(name) is None:
            concrete = _concrete(name, text)
            parts.append(concrete if concrete is not None else name)
        elif kv not in parts:  # where the first layer's input was
            parts.append(kv)
    return ", ".join(parts)


def _concrete(name: str, text: str) -> str | None:
    """'input_ids 1x128, default size' -> 'input_ids 1x128' (a size the run uses; where it
    came from is the Generation dock's to say); None when `text` gives a symbolic type."""
    rest = text[len(name) :].strip()
    shape = rest.split(",", 1)[0].strip()
    return f"{name} {shape}" if re.fullmatch(r"\d+(x\d+)*", shape) else None
