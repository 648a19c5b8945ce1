"""What every benchmark script does with its result: print it and keep it in a file."""

from __future__ import annotations

from pathlib import Path


def publish(text: str, out: str | Path, lead: str = "") -> None:
    """Print `text` (after `lead`) and write it to `out`, making its folder as needed."""
    print(lead + text)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
