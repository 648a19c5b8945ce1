"""engine.model.genai_config: a genai folder's config read into a dataclass, and every broken
config a one-line ModelError naming the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.errors import ModelError
from engine.model.genai_config import read_genai_config


def minimal() -> dict[str, Any]:
    return {
        "model": {
            "type": "llama",
            "context_length": 128,
            "eos_token_id": [2, 7],
            "decoder": {
                "filename": "model.onnx",
                "hidden_size": 64,
                "num_attention_heads": 4,
                "num_hidden_layers": 2,
            },
        },
    }


def write(tmp_path: Path, config: dict[str, Any] | str) -> Path:
    (tmp_path / "model.onnx").write_bytes(b"")
    text = config if isinstance(config, str) else json.dumps(config)
    (tmp_path / "genai_config.json").write_text(text)
    return tmp_path


def test_defaults_fill_what_the_config_leaves_out(tmp_path: Path) -> None:
    cfg = read_genai_config(write(tmp_path, minimal()))
    assert cfg.model_file == tmp_path / "model.onnx"
    assert (cfg.num_layers, cfg.num_heads, cfg.num_kv_heads, cfg.head_size) == (2, 4, 4, 16)
    assert cfg.max_length == 128 and not cfg.past_present_share_buffer
    assert cfg.eos_token_ids == (2, 7) and cfg.bos_token_id is None
    assert cfg.past_names(1) == ("past_key_values.1.key", "past_key_values.1.value")
    assert cfg.present_names(0) == ("present.0.key", "present.0.value")
    assert cfg.kv_shape(1, 128) == (1, 4, 128, 16)


def test_names_from_the_config(tmp_path: Path) -> None:
    config = minimal()
    config["model"]["decoder"]["inputs"] = {"past_key_names": "pk_%d", "input_ids": "ids"}
    config["model"]["decoder"]["outputs"] = {"present_value_names": "pv_%d", "logits": "out"}
    config["search"] = {"max_length": 64, "past_present_share_buffer": True}
    cfg = read_genai_config(write(tmp_path, config) / "genai_config.json")
    assert cfg.past_names(3)[0] == "pk_3" and cfg.present_names(3)[1] == "pv_3"
    assert (cfg.input_ids_name, cfg.logits_name) == ("ids", "out")
    assert cfg.max_length == 64 and cfg.past_present_share_buffer


def broken(tmp_path: Path, change: str) -> str:
    """The error message for `minimal()` with one change applied."""
    config: dict[str, Any] | str = minimal()
    assert isinstance(config, dict)
    decoder = config["model"]["decoder"]
    if change == "garbled":
        config = '{"model": {'
    elif change == "no head count":
        del decoder["num_attention_heads"]
    elif change == "layers as text":
        decoder["num_hidden_layers"] = "two"
    elif change == "no model file":
        decoder["filename"] = "missing.onnx"
    elif change == "pattern without %d":
        decoder["inputs"] = {"past_key_names": "past.key"}
    elif change == "eos as text":
        config["model"]["eos_token_id"] = "</s>"
    folder = write(tmp_path, config)
    with pytest.raises(ModelError) as info:
        read_genai_config(folder)
    assert info.value.path == str(folder / "genai_config.json")
    text = str(info.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("garbled", "not valid JSON"),
        ("no head count", "missing key model.decoder.num_attention_heads"),
        ("layers as text", "num_hidden_layers must be a non-negative integer, got 'two'"),
        ("no model file", "missing.onnx is not in the folder"),
        ("pattern without %d", "past_key_names must hold %d once"),
        ("eos as text", "eos_token_id must be an integer or a list"),
    ],
)
def test_broken_config_is_one_line_naming_the_file(
    tmp_path: Path, change: str, expected: str
) -> None:
    assert expected in broken(tmp_path, change)


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="not an onnxruntime-genai model folder") as info:
        read_genai_config(tmp_path / "nothing")
    assert info.value.path == str(tmp_path / "nothing" / "genai_config.json")
