"""Which model families the installed onnxruntime-genai builder builds, read from its own
source text (never imported or executed here), so a folder of another family is refused in
one line that names it, before a builder process starts."""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path
from typing import Any

from engine.errors import ConfigError

_ARCH = re.compile(r'architectures\[0\]\s*==\s*"(\w+)"')


@functools.cache
def builder_architectures() -> frozenset[str]:
    """e.g. {'LlamaForCausalLM', 'Gemma3ForCausalLM', 'Qwen2ForCausalLM', ...}; empty when
    the builder cannot be found (its own error then says why)."""
    spec = importlib.util.find_spec("onnxruntime_genai")
    if spec is None or not spec.submodule_search_locations:
        return frozenset()
    source = Path(next(iter(spec.submodule_search_locations))) / "models" / "builder.py"
    try:
        return frozenset(_ARCH.findall(source.read_text(encoding="utf-8", errors="replace")))
    except OSError:
        return frozenset()


def family(name: str) -> str:
    """'LlamaForCausalLM' -> 'Llama'."""
    return re.sub(r"(ForCausalLM|ForConditionalGeneration|Model)$", "", name) or name


def check_family(config: dict[str, Any], where: Path) -> str:
    """The architecture a config.json declares, or one line on why it cannot be built."""
    archs = config.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise ConfigError(f"{where}: no 'architectures' in config.json (which model class "
                          "the weights are for)")  # fmt: skip
    arch = archs[0]
    known = builder_architectures()
    if known and arch not in known:
        names = ", ".join(sorted({family(a) for a in known}))
        raise ConfigError(f"{where}: architecture {arch}: the onnxruntime-genai builder "
                          f"builds {names}; not {family(arch)}")  # fmt: skip
    return arch
