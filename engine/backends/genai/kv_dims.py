"""A decoder ONNX's past-KV inputs sized from the model's own config: `opscope memory
FOLDER/model.onnx` (and any decoder with past_key_values inputs beside a genai_config.json
or a Hugging Face config.json) gets the batch, the KV heads, the head size and a past
length (0: the prompt's prefill) from the config instead of guesses the model rejects
(224 for a symbolic head size: "Input 'past_key' dimension 3 should match the packed KV
head dimension"). Without a config beside it the first such input is named, with the
--dim flags that size it, in one line."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from engine.backends.genai.json_file import read_json
from engine.backends.genai.model import CONFIG_FILE, MAX_CONFIG_BYTES, read_config
from engine.errors import InputError, ModelError, one_line
from engine.model.info import ModelInfo, ValueInfo

HF_CONFIG = "config.json"
# past_key_values.0.key (genai, optimum), past.0.key, past_key.0 ...: a decoder's past
PAST = re.compile(r"^past(_key_values)?[._]\d+[._](key|value)$|^past_(key|value)[._]\d+$")

ROLES = ("batch", "KV heads", "past tokens", "head size")  # a past input's axes


@dataclass(frozen=True)
class KVShape:
    """The cache's sizes as the config beside the model says them."""

    kv_heads: int
    head_size: int
    source: Path  # the config file read


def past_inputs(info: ModelInfo) -> list[ValueInfo]:
    """The model's past-KV inputs, by name."""
    return [v for v in info.inputs if PAST.match(v.name)]


def kv_shape_beside(model_path: str | Path) -> KVShape | None:
    """The KV heads and head size from genai_config.json (read as the genai engine reads
    it) or config.json beside the model; None when neither is there."""
    folder = Path(model_path).parent
    if (folder / CONFIG_FILE).is_file():
        shape = read_config(folder).shape
        return KVShape(shape.kv_heads, shape.head_size, folder / CONFIG_FILE)
    hf = folder / HF_CONFIG
    if not hf.is_file():
        return None
    data = read_json(hf, MAX_CONFIG_BYTES, ModelError)
    try:
        cfg = data.get("text_config", data) if isinstance(data, dict) else {}
        heads = int(cfg["num_attention_heads"])
        kv_heads = int(cfg.get("num_key_value_heads") or heads)
        head_size = int(cfg.get("head_dim") or int(cfg["hidden_size"]) // heads)
        if min(heads, kv_heads, head_size) < 1:
            raise ValueError("a size below 1")
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        raise ModelError(f"unusable config ({one_line(exc)})", hf) from exc
    return KVShape(kv_heads, head_size, hf)


def decoder_shapes(
    info: ModelInfo,
    batch: int,
    prompt_len: int,
    dims: Mapping[str, int],
    shapes: Mapping[str, tuple[int, ...]],
    past_len: int = 0,
) -> tuple[dict[str, int], dict[str, tuple[int, ...]]]:
    """`dims` and `shapes` with the past-KV inputs' whole shapes filled from the config
    beside the model ([batch, KV heads, `past_len`, head size]: shapes, as a past of 0 is
    no dim's size), the new tokens' dim at `prompt_len` and the attention mask's total at
    past + new; what `dims` or `shapes` give is kept. A model with no past input comes back
    as given; one with a past the user did not size and no config beside it is an
    InputError naming the input and the flags to pass."""
    past = [v for v in past_inputs(info) if v.name not in shapes and v.shape is not None]
    if not past:
        return dict(dims), dict(shapes)
    known = dict(dims)
    for v in info.inputs:  # sizes pinned by whole shapes given for other inputs
        if v.name in shapes and v.shape is not None:
            for d, size in zip(v.shape, shapes[v.name], strict=False):
                if isinstance(d, str):
                    known.setdefault(d, size)
    first = past[0]
    open_dims = [d for a, d in enumerate(first.shape or ()) if isinstance(d, str) and a > 0]
    kv = None
    if not all(d in known for d in open_dims):
        kv = kv_shape_beside(info.path)
        if kv is None:
            _refuse(info, first, [d for d in open_dims if d not in known])
    wanted = (batch, None if kv is None else kv.kv_heads, past_len,
              None if kv is None else kv.head_size)  # fmt: skip
    out_shapes = dict(shapes)
    for v in past:
        shape: list[int] = []
        for d, want in zip(v.shape or (), wanted, strict=False):
            if isinstance(d, int):
                shape.append(d)
            elif isinstance(d, str) and d in known:
                shape.append(known[d])
            elif want is not None:
                shape.append(want)
            else:  # a past whose rank is not [batch, heads, length, head size]
                _refuse(info, v, [d if isinstance(d, str) else f"{v.name}[{len(shape)}]"])
        if len(shape) == len(v.shape or ()):
            out_shapes[v.name] = tuple(shape)
            for d, size in zip(v.shape or (), shape, strict=False):
                if isinstance(d, str):
                    known.setdefault(d, size)
    out_dims = dict(dims)
    _sequence_dims(info, known, out_dims, prompt_len)
    return out_dims, out_shapes


def _sequence_dims(
    info: ModelInfo, known: Mapping[str, int], out: dict[str, int], prompt_len: int
) -> None:
    """The new tokens' dim (input_ids' second) at `prompt_len`, and a named dim of the
    attention mask that is neither: the total, past + new (into `out`, unless known)."""
    by_name = {v.name: v for v in info.inputs}
    ids = by_name.get("input_ids")
    seq = ids.shape[1] if ids is not None and ids.shape and len(ids.shape) == 2 else None
    new = prompt_len
    if isinstance(seq, str) and seq.isidentifier():
        new = known.get(seq, prompt_len)
        if seq not in known:
            out[seq] = new
    pasts = [v.shape[2] for v in past_inputs(info) if v.shape and len(v.shape) == 4]
    past_name = next((d for d in pasts if isinstance(d, str)), None)
    mask = by_name.get("attention_mask")
    total = mask.shape[1] if mask is not None and mask.shape and len(mask.shape) == 2 else None
    named = isinstance(total, str) and total.isidentifier()
    if named and isinstance(total, str) and total not in (seq, past_name, *known):
        out[total] = (known.get(past_name, 0) if past_name else 0) + new


def _refuse(info: ModelInfo, v: ValueInfo, missing: list[str]) -> NoReturn:
    roles = {d: ROLES[a] for a, d in enumerate(v.shape or ()) if a < len(ROLES)}
    flags = ", ".join(f"--dim {d}=N ({roles.get(d, 'its size')})" for d in missing)
    raise InputError(
        f"input {v.name} {v.shape_text()} is a decoder's past KV cache and no {CONFIG_FILE} "
        f"or {HF_CONFIG} beside the model gives its sizes: put the model's config beside it, "
        f"or pass {flags}",
        info.path,
    )
