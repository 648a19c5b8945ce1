"""The on-disk cache of built variants, keyed by model hash and variant parameters.

Entries are folders `<root>/<kind>/<key>/` holding a `meta.json`; a hit refreshes the
entry's time. The folders together are kept under a size cap (`$OPSCOPE_CACHE_MAX_GB`,
default 4): committing a new entry evicts the least recently used others until the total
fits. A quantized copy of a large model is hundreds of MB, and a tuning session builds
dozens, so an uncapped cache fills a disk.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LEASES = ".leases"  # inside an entry: one file per process using it (see Lease)
DEFAULT_MAX_GB = 4.0
STALE_STAGING_S = 24 * 3600.0  # a scratch folder this old was left by a killed build
KEPT_LONGEST = ("llm-imports",)  # evicted only once nothing else is left to evict
RECENT_S = 60.0  # entries used this recently are not evicted (another process may be loading one)


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
    meta = folder / "meta.json"
    if not meta.is_file():
        return None
    with contextlib.suppress(OSError):  # recency for eviction; a read-only cache still reads
        os.utime(meta)
    return folder


def read_meta(folder: Path) -> dict[str, Any]:
    try:
        data = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError, RecursionError):
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
        trim(keep=self.final)
        return self.final

    def discard(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


class Lease:
    """This process uses a cache entry (the live engine runs and profiles a variant): `trim`
    never evicts it while the lease is held. A lease is a file naming the process and its
    start time, so a killed process's lease is seen as stale and ignored."""

    def __init__(self, file: Path) -> None:
        self.file = file

    def release(self) -> None:
        with contextlib.suppress(OSError):
            self.file.unlink(missing_ok=True)


def lease(folder: Path) -> Lease | None:
    """Hold the entry at `folder` (None when it is not in the cache or cannot be marked)."""
    try:
        folder.resolve().relative_to(cache_root().resolve())
    except (ValueError, OSError):
        return None  # the original model, not a cache entry
    pid = os.getpid()
    file = folder / LEASES / f"{pid}-{os.urandom(4).hex()}"
    try:
        file.parent.mkdir(exist_ok=True)
        file.write_text(json.dumps({"pid": pid, "started": _started(pid)}))
    except OSError:
        return None  # a read-only cache: nothing evicts from it either
    return Lease(file)


def leased(folder: Path) -> bool:
    """Some live process holds a lease on the entry (stale leases are removed)."""
    held = False
    try:
        files = list((folder / LEASES).iterdir())
    except OSError:
        return False
    for f in files:
        try:
            data = json.loads(f.read_text())
            pid, started = int(data["pid"]), data["started"]
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            continue  # being written, or not ours: leave it
        now = _started(pid)
        if now is not None and (started is None or abs(now - float(started)) <= 1.0):
            held = True
        else:
            with contextlib.suppress(OSError):
                f.unlink()
    return held


def _started(pid: int) -> float | None:
    import psutil

    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.Error, OSError, ValueError):
        return None


@dataclass(frozen=True)
class Entry:
    kind: str
    key: str
    path: Path
    bytes: int
    used: float  # when last built or read (epoch seconds)


def max_bytes() -> int:
    """The cap from `$OPSCOPE_CACHE_MAX_GB` (a positive number of GB), else the default."""
    raw = os.environ.get("OPSCOPE_CACHE_MAX_GB", "")
    try:
        gb = float(raw) if raw else DEFAULT_MAX_GB
    except ValueError:
        gb = DEFAULT_MAX_GB
    return int((gb if gb > 0 else DEFAULT_MAX_GB) * 1e9)


def entries() -> list[Entry]:
    """Every complete folder entry under the cache root, least recently used first."""
    found = []
    root = cache_root()
    for kind_dir in _subdirs(root):
        for folder in _subdirs(kind_dir):
            meta = folder / "meta.json"
            if folder.name.startswith(".") or not meta.is_file():
                continue
            with contextlib.suppress(OSError):
                used = meta.stat().st_mtime
                found.append(Entry(kind_dir.name, folder.name, folder, _size(folder), used))
    return sorted(found, key=lambda e: e.used)


def trim(
    keep: Path | None = None, limit: int | None = None, recent_s: float | None = None
) -> list[Entry]:
    """Evict least recently used entries until the cache fits `limit` (default `max_bytes()`).

    Never evicts `keep`, an entry a live process holds (`lease`) or one used in the last
    `recent_s` (default a minute); also clears scratch folders that killed builds left
    behind. Returns what was evicted."""
    limit = max_bytes() if limit is None else limit
    recent_s = RECENT_S if recent_s is None else recent_s
    _clear_stale_staging()
    # imported models last: an import (a builder run of minutes) is what every variant of
    # it is built from, and a variant rebuilds from it in seconds
    listed = sorted(entries(), key=lambda e: e.kind in KEPT_LONGEST)
    total = sum(e.bytes for e in listed)
    now = time.time()
    evicted = []
    for e in listed:
        if total <= limit:
            break
        if e.path == keep or now - e.used < recent_s or leased(e.path):
            continue
        if remove(e.path):
            total -= e.bytes
            evicted.append(e)
    return evicted


def remove(folder: Path) -> bool:
    """Take an entry out atomically (renamed away first: a reader never sees half of it)."""
    gone = folder.with_name(f".evict-{folder.name}-{os.getpid()}")
    try:
        os.replace(folder, gone)
    except OSError:  # in use on a platform that locks open files, or already gone
        return False
    shutil.rmtree(gone, ignore_errors=True)
    return True


def _clear_stale_staging() -> None:
    cutoff = time.time() - STALE_STAGING_S
    for kind_dir in _subdirs(cache_root()):
        for folder in _subdirs(kind_dir):
            if not folder.name.startswith("."):
                continue
            with contextlib.suppress(OSError):
                if folder.name.startswith(".evict-") or folder.stat().st_mtime < cutoff:
                    shutil.rmtree(folder, ignore_errors=True)


def _subdirs(folder: Path) -> list[Path]:
    try:
        return [p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []


def _size(folder: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total
