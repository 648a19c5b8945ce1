"""Writing files safely: strict JSON values and atomic writes (temp file, then rename),
shared by the CLI's --json, exports, reports and the session store."""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from engine.errors import OpScopeError


def finite(value: Any) -> Any:
    """NaN and infinities -> None (recursively), so the output is strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def write_atomic(
    target: str | Path,
    fill: Callable[[TextIO], object],
    newline: str | None = None,
    error: type[OpScopeError] = OpScopeError,
) -> None:
    """Write a text file through a temporary file renamed over `target`; a reader never sees
    half a file. OS errors become `error` naming the file."""
    target = Path(target)
    tmp: str | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".opscope-", dir=target.parent)
        with os.fdopen(fd, "w", encoding="utf-8", newline=newline) as fh:
            fill(fh)
        # mkstemp makes the file private (0600); an export is an ordinary file
        os.chmod(tmp, target.stat().st_mode & 0o777 if target.exists() else 0o644)
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise error(f"cannot write ({exc.strerror or exc})", target) from exc
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
