"""The CPU's data caches, from the OS: each level's size and how many cores share one
(Linux: /sys/devices/system/cpu/cpu0/cache). The hierarchical roofline measures a bandwidth
roof at each level with a working set sized to it (engine/machine/level_bandwidth.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SYS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")


@dataclass(frozen=True)
class CacheLevel:
    name: str  # "L1", "L2", "L3"
    bytes: int  # one instance's size
    shared_by: int  # cores sharing one instance (1: private to a core)


def cache_levels(root: Path = SYS_CACHE) -> list[CacheLevel]:
    """The data and unified caches, smallest first; [] where the OS does not say."""
    levels: dict[int, CacheLevel] = {}
    try:
        entries = sorted(root.glob("index*"))
    except OSError:
        return []
    for entry in entries:
        try:
            kind = (entry / "type").read_text().strip()
            level = int((entry / "level").read_text())
            size = _size((entry / "size").read_text().strip())
            shared = _cpu_count((entry / "shared_cpu_list").read_text().strip())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and size > 0:
            levels[level] = CacheLevel(f"L{level}", size, max(shared, 1))
    return [levels[k] for k in sorted(levels)]


def _size(text: str) -> int:
    """'32K' -> 32768, '1024K', '32M', '1G'."""
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    if text and text[-1].upper() in units:
        return int(text[:-1]) * units[text[-1].upper()]
    return int(text)


def _cpu_count(text: str) -> int:
    """'0-3,8' -> 5."""
    count = 0
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        count += int(hi or lo) - int(lo) + 1
    return count
