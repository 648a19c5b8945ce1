"""The status bar's figures in three wordings, longest first (no Qt): the whole line
(p50 and p99 over the plot header's window, the rate, and how busy the machine was), a
shorter one without the window, and the shortest that still says p50, p99 and BUSY. The
label shows the longest that fits its width and keeps the whole line in its tooltip: at
1024 px the "machine BUSY ..." tail was cut off."""

from __future__ import annotations

from typing import Any

from engine.api import Contention
from widgets.models.latency_series import window_text
from widgets.numbers import figure

WAITING = "waiting for samples…"
# the widths the label is sized by: its shortest wording, and its longest
SHORTEST = "p50 888.888 · p99 888.888 ms · BUSY"
LONGEST = (
    "p50 888.888 ms · p99 888.888 ms over the last 8,888 inferences (88.8 min) · "
    "88,888.8 samples/s · machine BUSY (others 88.8 CPUs)"
)


def rate_wordings(stats: dict[str, Any], contention: Contention | None) -> tuple[str, ...]:
    """The figures of `stats` (the plot header's `shown_stats`) and the machine's load,
    longest wording first; one wording while there are no samples."""
    if not stats.get("count"):
        return (WAITING,)
    p50, p99 = figure(stats["p50"]), figure(stats["p99"])
    per_s = (  # a generating model's: tokens over its generations' time
        f"{figure(stats['tokens_per_s'], 4)} tokens/s"
        if "tokens_per_s" in stats
        else f"{figure(stats['samples_per_s'], 4)} samples/s"
    )
    busy = contention is not None and contention.busy
    others = f"others {contention.others_cpu:.1f} CPUs" if contention is not None else ""
    whole = f"p50 {p50} ms · p99 {p99} ms {window_text(stats)} · {per_s}"
    shorter = f"p50 {p50} ms · p99 {p99} ms · {per_s}"
    shortest = f"p50 {p50} · p99 {p99} ms"
    if busy:
        whole += f" · machine BUSY ({others})"
        shorter += f" · BUSY ({others})"
        shortest += " · BUSY"
    return whole, shorter, shortest
