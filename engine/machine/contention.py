"""Moved to engine/measure/contention.py (the events carry it, and events sit below
machine); this name stays until every import uses the new one."""

from engine.measure.contention import (
    Contention,
    ContentionProbe,
    Counters,
    Window,
    combine,
)

__all__ = ["Contention", "ContentionProbe", "Counters", "Window", "combine"]
