"""The size a Hugging Face config.json describes, estimated from its fields before anything
is built: the builder (transformers, then onnxruntime-genai) allocates every layer the config
names, so `num_hidden_layers` 1e9 grew it to 16 GB before it was killed. A config whose model
cannot fit in the memory available now is refused in one line naming the file and the field
that makes it so large."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.errors import ConfigError

# each size the estimate reads, by its names across architectures (the first one present)
FIELDS: dict[str, tuple[str, ...]] = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "intermediate": ("intermediate_size", "n_inner", "ffn_dim"),
    "vocab": ("vocab_size",),
    "heads": ("num_attention_heads", "n_head"),
    "kv_heads": ("num_key_value_heads",),
    "head_dim": ("head_dim",),
    "experts": ("num_local_experts", "num_experts", "n_routed_experts"),
    "positions": ("max_position_embeddings", "n_positions"),
}
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
LAYER_OVERHEAD = 32 << 10  # a built layer's objects besides its weights (torch modules)


def config_sizes(data: Mapping[str, Any], path: Path) -> dict[str, tuple[str, int]]:
    """The size fields present: role -> (field name, value). A multimodal config's sizes are
    in its text_config. A size that is not a whole number >= 0 is refused in one line."""
    text = data.get("text_config")
    if isinstance(text, dict) and not any(n in data for n in FIELDS["layers"]):
        data = text
    sizes: dict[str, tuple[str, int]] = {}
    for role, names in FIELDS.items():
        name = next((n for n in names if data.get(n) is not None), None)
        if name is None:
            continue
        value = data[name]
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        if isinstance(value, bool) or not whole or value < 0:
            raise ConfigError(f"{name} must be a whole number of at least 0, got {value!r}", path)
        sizes[role] = (name, int(value))
    return sizes


def estimate_bytes(sizes: Mapping[str, int], dtype_bytes: int) -> float:
    """Weights (attention, MLP per expert, norms, embeddings and head) in the config's dtype,
    the rotary tables, and each layer's objects. In floats: a lying config can pass 2**64."""

    def get(role: str, default: float = 0.0) -> float:
        return float(min(sizes[role], 10**30)) if role in sizes else default

    layers, hidden = get("layers"), get("hidden")
    inter = get("intermediate", 4 * hidden)
    heads = get("heads") or 1.0
    head_dim = get("head_dim", hidden // heads)
    kv = get("kv_heads", heads)
    attention = 2 * hidden * heads * head_dim + 2 * hidden * kv * head_dim
    mlp = 3 * hidden * inter * max(1.0, get("experts", 1.0))
    embeddings = 2 * get("vocab") * hidden
    weights = (layers * (attention + mlp + 2 * hidden) + embeddings) * dtype_bytes
    rotary = 2 * get("positions") * head_dim * 4
    return weights + rotary + layers * LAYER_OVERHEAD


def check_config_size(data: Mapping[str, Any], path: Path) -> None:
    """Refuse, in one line, a config whose model would not fit in memory, naming the field
    that makes it largest (the one whose value, were it 1, would shrink the estimate most)."""
    from engine.model.sizes import check_memory

    named = config_sizes(data, path)
    sizes = {role: value for role, (_, value) in named.items()}
    dtype = data.get("torch_dtype", data.get("dtype"))
    nbytes = DTYPE_BYTES.get(dtype, 2) if isinstance(dtype, str) else 2
    need = estimate_bytes(sizes, nbytes)
    if not named or not math.isfinite(need):
        return
    worst = max(named, key=lambda r: need / max(estimate_bytes({**sizes, r: 1}, nbytes), 1.0))
    field, value = named[worst]
    others = ", ".join(f"{n} {v:,}" for r, (n, v) in named.items() if r != worst)
    check_memory(
        need,
        f"{field} {value:,} (with {others}): the model it describes",
        f"check {field} in the config",
        str(path),
    )
