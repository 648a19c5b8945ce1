"""A Hugging Face config.json is read bounded and sized before anything is built: a config
naming 1e9 layers grew import-hf to 16 GB, one nested 100,000 levels deep was a traceback;
now each is one line naming the file (and the field). The same JSON reader serves
genai_config.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.backends.genai.hf_import import ImportRequest, check_request
from engine.backends.genai.hf_size import check_config_size, config_sizes, estimate_bytes
from engine.backends.genai.json_file import read_json
from engine.backends.genai.model import read_config
from engine.errors import ConfigError, ModelError, OpScopeError
from tests.test_cli import opscope

TINY = {
    "model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "max_position_embeddings": 256, "torch_dtype": "float32",
}  # fmt: skip
LLAMA_7B = {
    "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
    "max_position_embeddings": 4096, "torch_dtype": "float16",
}  # fmt: skip
DEEP = '{"a":' * 100_000 + "1" + "}" * 100_000


def _folder(root: Path, name: str, text: str) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "config.json").write_text(text)
    return folder


def test_the_size_a_config_describes_is_estimated_from_its_fields(tmp_path: Path) -> None:
    sizes = {r: v for r, (_, v) in config_sizes(LLAMA_7B, tmp_path).items()}
    assert estimate_bytes(sizes, 2) == pytest.approx(6.74e9 * 2, rel=0.02)  # Llama-2-7B
    check_config_size(TINY, tmp_path / "config.json")  # a small model passes
    nested = {"model_type": "llava", "text_config": dict(TINY, hidden_size=10**9)}
    with pytest.raises(OpScopeError, match=r"config\.json: hidden_size 1,000,000,000 \(with "):
        check_config_size(nested, tmp_path / "config.json")
    with pytest.raises(ConfigError, match=r"num_hidden_layers must be a whole number.*'many'"):
        config_sizes(dict(TINY, num_hidden_layers="many"), tmp_path / "config.json")


def test_absurd_or_deep_configs_are_one_line_before_anything_is_built(tmp_path: Path) -> None:
    big = _folder(tmp_path, "big", json.dumps(dict(TINY, num_hidden_layers=1_000_000_000)))
    with pytest.raises(OpScopeError, match=r"big/config\.json: num_hidden_layers 1,000,000,000"):
        check_request(ImportRequest(str(big), str(tmp_path / "out")))
    floated = _folder(tmp_path, "floated", json.dumps(TINY).replace(
        '"num_hidden_layers": 2', '"num_hidden_layers": 1e9'))  # fmt: skip
    refused = r"would take .* TB, more than half of .* check num_hidden_layers"
    with pytest.raises(OpScopeError, match=refused):
        check_request(ImportRequest(str(floated), str(tmp_path / "out")))
    deep = _folder(tmp_path, "deep", DEEP)
    proc = opscope("import-hf", deep, tmp_path / "out")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip() == f"opscope: error: {deep}/config.json: nests too deeply to " \
        "read (arrays or objects inside each other)"  # fmt: skip
    proc = opscope("import-hf", big, tmp_path / "out")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "num_hidden_layers 1,000,000,000" in proc.stderr
    assert "check num_hidden_layers in the config" in proc.stderr


def test_user_json_is_read_bounded_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="/dev/zero: larger than 1 KiB"):
        read_json("/dev/zero", 1024, ModelError)  # bounded: never read whole
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": 1,,}')
    with pytest.raises(ModelError, match=r"bad\.json: not JSON \(.* at line 1 column 9\)"):
        read_json(bad, 1024, ModelError)
    genai = tmp_path / "genai"
    genai.mkdir()
    (genai / "genai_config.json").write_text(DEEP)
    with pytest.raises(ModelError, match=r"genai_config\.json: nests too deeply"):
        read_config(genai)


def test_deep_json_in_the_cache_or_a_profile_is_unreadable_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.cache import read_meta
    from engine.machine.peaks import cached_peaks, peaks_path
    from engine.measure.op_trace import ProfileFormatError, parse_ort_profile

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "meta.json").write_text(DEEP)
    assert read_meta(tmp_path) == {}  # an entry that cannot be read is no entry
    peaks_path().parent.mkdir(parents=True)
    peaks_path().write_text(DEEP)
    assert cached_peaks() is None  # measured again
    (tmp_path / "profile.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ProfileFormatError, match="nests too deeply"):
        parse_ort_profile(tmp_path / "profile.json")
