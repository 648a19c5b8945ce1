"""A GGUF file checked before anything is built from it: the header, every tensor's extent
within the file (a truncated download is refused here in one line, not deep in a loader),
and the architecture it declares. Read with the `gguf` package's reader (memory-mapped: the
weights are not loaded)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from engine.errors import ConfigError, ModelError, one_line

MAGIC = b"GGUF"
VERSIONS = (2, 3)


@dataclass(frozen=True)
class GgufFacts:
    architecture: str  # general.architecture, e.g. 'llama', 'gemma3'
    name: str  # general.name, or the file's stem
    tensors: int
    bytes: int


def check_gguf(path: str | Path) -> GgufFacts:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: not a file")
    size = p.stat().st_size
    with p.open("rb") as f:
        head = f.read(8)
    if len(head) < 8 or head[:4] != MAGIC:
        raise ModelError("not a GGUF file (it does not start with 'GGUF')", p)
    version = struct.unpack("<I", head[4:8])[0]
    if version not in VERSIONS:
        raise ModelError(f"GGUF version {version}: versions {VERSIONS} are read", p)
    try:
        import gguf
    except ImportError as exc:
        raise ConfigError("reading a GGUF file needs gguf: pip install 'opscope[hf]'") from exc
    try:
        reader = gguf.GGUFReader(str(p))
        end = max((t.data_offset + int(t.n_bytes) for t in reader.tensors), default=0)
        arch = _text(reader, "general.architecture")
        name = _text(reader, "general.name") or p.stem
    except Exception as exc:  # the reader's ValueError, IndexError... on damaged bytes
        raise ModelError(f"not a readable GGUF file, truncated or damaged ({one_line(exc)})",
                         p) from exc  # fmt: skip
    if end > size:
        raise ModelError(f"truncated: its tensors need {end:,} bytes, the file has {size:,}", p)
    if not arch:
        raise ModelError("the GGUF file names no architecture (general.architecture)", p)
    if not reader.tensors:
        raise ModelError("the GGUF file holds no tensors", p)
    return GgufFacts(arch, name, len(reader.tensors), size)


def _text(reader: object, key: str) -> str:
    field = reader.fields.get(key)  # type: ignore[attr-defined]
    if field is None or not field.data:
        return ""
    return bytes(field.parts[field.data[0]]).decode("utf-8", errors="replace")
