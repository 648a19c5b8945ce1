"""The bundled demo models (package data, also inside the installer bundle)."""

from __future__ import annotations

import importlib.resources


def demo_model_path() -> str:
    """The bundled demo transformer (package data, also inside the installer bundle)."""
    ref = importlib.resources.files("resources") / "models" / "demo_transformer.onnx"
    return str(ref)


def demo_models() -> list[tuple[str, str]]:
    """The bundled demos that are present, as (menu label, path): the demo LLM folder is
    built at set-up (`make demo-llm`) and is missing from a checkout that skipped it."""
    models = importlib.resources.files("resources") / "models"
    found = [
        ("Demo &Transformer (ONNX)", models / "demo_transformer.onnx"),
        ("Demo &CNN (ONNX)", models / "demo_cnn.onnx"),
        ("Demo &LLM (generation)", models / "demo_llm" / "genai_config.json"),
    ]
    return [(label, str(ref)) for label, ref in found if ref.is_file()]
