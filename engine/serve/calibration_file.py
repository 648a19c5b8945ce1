"""Where a simulator's calibration is cached and how it is read back and written: one
JSON file per calibration context (model, config, machine, libraries) under OpScope's
cache. A file that does not parse (damaged, or from another version) is never fatal: the
caller is told why, in one notice, and measures again."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from engine.cache import cache_key, cache_root
from engine.events import Notice
from engine.files import write_atomic

T = TypeVar("T")


def calibration_path(context: dict[str, Any], prefix: str = "") -> Path:
    return cache_root() / "calibration" / f"{prefix}{cache_key(context)}.json"


def read_calibration(
    path: Path, parse: Callable[[dict[str, Any]], T], what: str
) -> tuple[T | None, Notice | None]:
    """(the parsed calibration, or None when there is none or it does not parse; the
    notice to show: from the cache, or why it is measured again)."""
    if not path.is_file():
        return None, None
    try:
        value = parse(json.loads(path.read_text()))
    except Exception as exc:  # damaged, foreign or older: measure again, say why
        return None, Notice("warning", f"cached {what} unreadable ({exc}); measuring again")
    return value, Notice("info", f"{what} from the cache ({path.name})")


def write_calibration(path: Path, data: dict[str, Any]) -> None:
    """Written whole or not at all (another process may be reading it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data)
    write_atomic(str(path), lambda fh: fh.write(text))
