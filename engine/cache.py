"""The on-disk cache of built variants, keyed by model hash and variant parameters."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any


def cache_root() -> Path:
    """`$OPSCOPE_CACHE_DIR`, else the user cache folder (e.g. ~/.cache/opscope)."""
    env = os.environ.get("OPSCOPE_CACHE_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("opscope", appauthor=False))


def cache_key(parts: dict[str, Any]) -> str:
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def cached_entry(kind: str, key: str) -> Path | None:
    """The folder of a complete entry, or None. Entries are complete once `meta.json` exists."""
    folder = cache_root() / kind / key
    return folder if (folder / "meta.json").is_file() else None


def read_meta(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


class Staging:
    """A scratch folder that becomes the cache entry atomically on `commit`."""

    def __init__(self, kind: str, key: str) -> None:
        self.final = cache_root() / kind / key
        self.final.parent.mkdir(parents=True, exist_ok=True)
        self.path = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=self.final.parent))

    def commit(self, meta: dict[str, Any]) -> Path:
        (self.path / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True))
        if self.final.exists():  # another process built it meanwhile: keep theirs
            shutil.rmtree(self.path, ignore_errors=True)
            return self.final
        os.replace(self.path, self.final)
        return self.final

    def discard(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
