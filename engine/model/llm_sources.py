"""What a path that is not an ONNX model may still be: a language model as it is shared (a
Hugging Face folder of config.json and safetensors weights, or one GGUF file), which OpScope
runs once it is imported into a generation folder. Read from names and four bytes, never
executed."""

from __future__ import annotations

from pathlib import Path

GGUF_MAGIC = b"GGUF"
GENAI_CONFIG = "genai_config.json"


def source_kind(path: str | Path) -> str | None:
    """'gguf', 'hf' (a Hugging Face folder not yet imported), or None."""
    p = Path(path)
    if p.is_file():
        if p.suffix.lower() == ".gguf":
            return "gguf"
        try:
            with p.open("rb") as f:
                return "gguf" if f.read(4) == GGUF_MAGIC else None
        except OSError:
            return None
    unimported = p.is_dir() and (p / "config.json").is_file() and not (p / GENAI_CONFIG).is_file()
    if unimported and (any(p.glob("*.safetensors")) or any(p.glob("*.bin"))):
        return "hf"
    return None


def import_hint(path: str | Path) -> str | None:
    """One line for a command handed such a source: what it is and how to run it."""
    kind = source_kind(path)
    if kind is None:
        return None
    what = "a GGUF file" if kind == "gguf" else "a Hugging Face model folder"
    return (
        f"{what}: import it first (opscope import-hf {path}), or open it in the window, "
        "which imports it"
    )
