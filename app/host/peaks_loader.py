"""The machine's peaks for the roofline, in the GUI process: read from the cache written by
`opscope system`, any profile run or the live engine host. A window without a live engine (a
recorded session) measures them in a background thread when missing, so the GUI thread
never blocks; the live window leaves it to its engine host, which measures with timing
paused (measured beside a running engine, peaks come out far too low)."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from PySide6.QtCore import QObject, Signal


class PeaksLoader(QObject):
    """`request()` returns the cached peaks or None and starts measuring; `loaded` follows."""

    loaded = Signal(object)  # the peaks dict (engine.machine.peaks.load_peaks)
    failed = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.peaks: dict[str, Any] | None = None
        self._thread: threading.Thread | None = None

    def request(self, measure: bool = True) -> dict[str, Any] | None:
        """The peaks if known; otherwise None, and (with `measure`) a measurement starts."""
        if self.peaks is not None:
            return self.peaks
        from engine.api import cached_peaks

        peaks = self.peaks = cached_peaks()
        if peaks is None and measure and self._thread is None:
            # not a daemon: interpreter exit waits (seconds) rather than kill it inside ORT
            self._thread = threading.Thread(target=self._measure, name="opscope-peaks")
            self._thread.start()
        return peaks

    def _measure(self) -> None:
        from engine.api import load_peaks

        try:
            peaks = load_peaks(gpu=False)  # no CUDA context in the GUI process
        except Exception as exc:  # reported once; the roofline then shows no roofs
            self._emit(self.failed, f"measuring the machine's peaks failed: {exc}")
            return
        self.peaks = peaks
        self._emit(self.loaded, peaks)

    @staticmethod
    def _emit(signal: Any, value: object) -> None:
        """Emit from the worker; the window may have closed meanwhile (object deleted)."""
        with contextlib.suppress(RuntimeError):
            signal.emit(value)


_shared: PeaksLoader | None = None


def shared_loader() -> PeaksLoader:
    """One loader per process: every window shares one measurement and its result."""
    global _shared
    if _shared is None:
        _shared = PeaksLoader()
    return _shared
