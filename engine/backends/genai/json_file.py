"""Reading a user's JSON file (a model's config, a profile): at most a bounded number of
bytes read (a FIFO or /dev/zero included), and one line for what cannot be used: too large,
unreadable, not JSON, nested too deeply for the parser."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.errors import OpScopeError, one_line


def read_json(path: str | Path, limit: int, error: type[OpScopeError] = OpScopeError) -> Any:
    """The parsed JSON of `path`, read as UTF-8 (bad bytes replaced), or `error` naming the
    file and the cause; a file past `limit` bytes is refused before it is parsed."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            raw = fh.read(limit + 1)
    except OSError as exc:
        raise error(f"cannot read ({exc.strerror or one_line(exc)})", p) from exc
    if len(raw) > limit:
        raise error(f"larger than {_size(limit)} (a JSON file this program reads is smaller)", p)
    try:
        return json.loads(raw.decode("utf-8", errors="replace"))
    except RecursionError as exc:
        raise error("nests too deeply to read (arrays or objects inside each other)", p) from exc
    except json.JSONDecodeError as exc:
        raise error(f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})", p) from exc
    except ValueError as exc:  # a number too long to convert
        raise error(f"not JSON ({one_line(exc)})", p) from exc


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
