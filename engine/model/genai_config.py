"""An onnxruntime-genai model folder's `genai_config.json`, read into a frozen dataclass.

What a generation loop needs to feed the decoder by hand (names of the inputs, outputs and
per-layer KV caches, their shapes, the stop token) without importing onnxruntime_genai.
Every problem a user can cause becomes a one-line `ModelError` naming the config file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import ModelError

CONFIG_FILE = "genai_config.json"

# onnxruntime-genai's own defaults for names the config leaves out.
DEFAULTS = {
    "input_ids": "input_ids",
    "attention_mask": "attention_mask",
    "position_ids": "position_ids",
    "past_key_names": "past_key_values.%d.key",
    "past_value_names": "past_key_values.%d.value",
    "logits": "logits",
    "present_key_names": "present.%d.key",
    "present_value_names": "present.%d.value",
}


@dataclass(frozen=True, slots=True)
class GenaiConfig:
    """The decoder of a genai folder. Name patterns hold `%d` for the layer index; a name
    (attention_mask, position_ids) is fed only if the ONNX model has that input."""

    config_path: Path
    model_type: str  # "llama", "phi3", ...
    model_file: Path  # the decoder's ONNX file, inside the folder
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_size: int
    hidden_size: int
    vocab_size: int | None
    context_length: int
    max_length: int  # search.max_length: the KV buffers' length when they are shared
    past_present_share_buffer: bool
    eos_token_ids: tuple[int, ...]
    bos_token_id: int | None
    pad_token_id: int | None
    input_ids_name: str
    attention_mask_name: str
    position_ids_name: str
    logits_name: str
    past_key_pattern: str
    past_value_pattern: str
    present_key_pattern: str
    present_value_pattern: str

    @property
    def folder(self) -> Path:
        return self.config_path.parent

    def past_names(self, layer: int) -> tuple[str, str]:
        """(key, value) input names of one layer's KV cache."""
        return self.past_key_pattern % layer, self.past_value_pattern % layer

    def present_names(self, layer: int) -> tuple[str, str]:
        """(key, value) output names of one layer's KV cache."""
        return self.present_key_pattern % layer, self.present_value_pattern % layer

    def kv_shape(self, batch: int, length: int) -> tuple[int, int, int, int]:
        """Shape of one key or value cache: [batch, kv heads, length, head size]."""
        return batch, self.num_kv_heads, length, self.head_size


class _Reader:
    """Typed look-ups into the parsed JSON; each failure names the key."""

    def __init__(self, data: dict[str, Any], path: Path) -> None:
        self.data, self.path = data, path

    def get(self, key: str, default: Any = None, required: bool = True) -> Any:
        node: Any = self.data
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                if required:
                    raise ModelError(f"missing key {key}", self.path)
                return default
            node = node[part]
        return node

    def integer(self, key: str, default: int | None = None) -> int:
        value = self.get(key, default, required=default is None)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ModelError(f"{key} must be a non-negative integer, got {value!r}", self.path)
        return value

    def optional_integer(self, key: str) -> int | None:
        return None if self.get(key, required=False) is None else self.integer(key)

    def text(self, key: str, default: str | None = None) -> str:
        value = self.get(key, default, required=default is None)
        if not isinstance(value, str) or not value:
            raise ModelError(f"{key} must be a non-empty string, got {value!r}", self.path)
        return value

    def pattern(self, key: str, default: str) -> str:
        value = self.text(key, default)
        if value.count("%d") != 1:
            raise ModelError(f"{key} must hold %d once (the layer index), got {value!r}", self.path)
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.get(key, default, required=False)
        if not isinstance(value, bool):
            raise ModelError(f"{key} must be true or false, got {value!r}", self.path)
        return value


def read_genai_config(folder: str | Path) -> GenaiConfig:
    """Read `folder/genai_config.json` (or the file itself); the decoder file must exist."""
    path = Path(folder)
    if path.is_dir() or path.name != CONFIG_FILE:
        path = path / CONFIG_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelError("not found: not an onnxruntime-genai model folder", path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"cannot read: {exc}", path) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelError(f"not valid JSON: {exc.msg} (line {exc.lineno})", path) from None
    if not isinstance(data, dict):
        raise ModelError("not a JSON object", path)
    r = _Reader(data, path)
    dec, ins, outs = "model.decoder", "model.decoder.inputs", "model.decoder.outputs"
    model_file = path.parent / r.text(f"{dec}.filename")
    if not model_file.is_file():
        raise ModelError(f"{dec}.filename: {model_file.name} is not in the folder", path)
    eos = r.get("model.eos_token_id")
    eos_ids = tuple(eos) if isinstance(eos, list) else (eos,)
    if not eos_ids or not all(isinstance(t, int) and not isinstance(t, bool) for t in eos_ids):
        raise ModelError(f"model.eos_token_id must be an integer or a list, got {eos!r}", path)
    context = r.integer("model.context_length")
    heads = r.integer(f"{dec}.num_attention_heads")
    hidden = r.integer(f"{dec}.hidden_size")
    if heads == 0:
        raise ModelError(f"{dec}.num_attention_heads must be positive", path)
    return GenaiConfig(
        config_path=path,
        model_type=r.text("model.type"),
        model_file=model_file,
        num_layers=r.integer(f"{dec}.num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=r.integer(f"{dec}.num_key_value_heads", heads),
        head_size=r.integer(f"{dec}.head_size", hidden // heads),
        hidden_size=hidden,
        vocab_size=r.optional_integer("model.vocab_size"),
        context_length=context,
        max_length=r.integer("search.max_length", context),
        past_present_share_buffer=r.boolean("search.past_present_share_buffer", False),
        eos_token_ids=eos_ids,
        bos_token_id=r.optional_integer("model.bos_token_id"),
        pad_token_id=r.optional_integer("model.pad_token_id"),
        input_ids_name=r.text(f"{ins}.input_ids", DEFAULTS["input_ids"]),
        attention_mask_name=r.text(f"{ins}.attention_mask", DEFAULTS["attention_mask"]),
        position_ids_name=r.text(f"{ins}.position_ids", DEFAULTS["position_ids"]),
        logits_name=r.text(f"{outs}.logits", DEFAULTS["logits"]),
        past_key_pattern=r.pattern(f"{ins}.past_key_names", DEFAULTS["past_key_names"]),
        past_value_pattern=r.pattern(f"{ins}.past_value_names", DEFAULTS["past_value_names"]),
        present_key_pattern=r.pattern(f"{outs}.present_key_names", DEFAULTS["present_key_names"]),
        present_value_pattern=r.pattern(
            f"{outs}.present_value_names", DEFAULTS["present_value_names"]
        ),
    )
