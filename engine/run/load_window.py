"""A profiling pass says how busy the machine was while it ran: its events pass through,
each OpProfile stamped with the contention since the pass began (or the last pass)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from engine.events import Event, OpProfile
from engine.measure.contention import Window


def with_load(events: Iterator[Event]) -> Iterator[Event]:
    """`events` unchanged, but every OpProfile carries the machine's load during its pass
    (a generating model's prefill and decode passes: each its own)."""
    window = Window()
    for ev in events:
        if isinstance(ev, OpProfile) and ev.contention is None:
            ev = replace(ev, contention=window.lap())
        yield ev
