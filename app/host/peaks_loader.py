"""The machine's peaks for the roofline, as the window knows them: read from the cache written
by `opscope system`, any profile run or the engine host, or as the engine host sent them
(`PeaksMeasured`). The window never measures them itself: measured beside a running engine,
peaks come out far too low, so the host measures them with timing paused (a peaks job)."""

from __future__ import annotations

from typing import Any


class PeaksLoader:
    """`request()` returns the peaks known (held, else cached), or None."""

    def __init__(self) -> None:
        self.peaks: dict[str, Any] | None = None

    def request(self) -> dict[str, Any] | None:
        if self.peaks is None:
            from engine.api import cached_peaks

            self.peaks = cached_peaks()
        return self.peaks


_shared: PeaksLoader | None = None


def shared_loader() -> PeaksLoader:
    """One per process: every window shares what the host measured."""
    global _shared
    if _shared is None:
        _shared = PeaksLoader()
    return _shared
