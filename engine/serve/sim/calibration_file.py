"""Where a simulator's calibration is cached and how it is read back and written: one
JSON file per calibration context (model, config, machine, libraries) under OpScope's
cache. A file that does not parse (damaged, or from another version) is never fatal: the
caller is told why, in one notice, and measures again."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from engine.cache import cache_key, cache_root
from engine.events import Notice
from engine.files import write_atomic

T = TypeVar("T")
DRIFT_WARN = 0.15  # a cached calibration off the engine's speed now by more: a warning


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


def drift_notice(what: str, ratio: float, path: Path, app_remedy: str) -> Notice | None:
    """A warning when the engine's speed now (`what`, taking `ratio` times the cached
    calibration's time) is off the calibration by more than DRIFT_WARN; else None. One line:
    by how much, how old the calibration is, what to do (on the command line, and
    `app_remedy` in the app)."""
    text = drift_text(what, ratio, path)
    if text is None:
        return None
    return Notice(
        "warning",
        f"{text}: predictions follow the calibration; measure again with --recalibrate "
        f"({app_remedy} in the app)",
    )


def drift_text(what: str, ratio: float, path: Path) -> str | None:
    """How far the engine's speed now is off the cached calibration, and how old that is,
    when by more than DRIFT_WARN; else None."""
    if not abs(ratio - 1) > DRIFT_WARN:
        return None
    how = (
        f"take {ratio:.2f}x the cached calibration's time"
        if ratio >= 1
        else f"run {1 / ratio:.2f}x faster than the cached calibration measured"
    )
    age_s = max(0.0, time.time() - path.stat().st_mtime) if path.exists() else 0.0
    age = f"{age_s / 3600:.1f} h" if age_s >= 3600 else f"{age_s / 60:.0f} min"
    return f"{what} now {how} (calibrated {age} ago)"
