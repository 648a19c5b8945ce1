"""What the Memory room's controller needs of its view (app/memory/view.py is the real one;
tests use `MagicMock(spec=MemoryViewPort)`)."""

from __future__ import annotations

from typing import Any, Protocol

from PySide6.QtCore import SignalInstance


class MemoryViewPort(Protocol):
    # signals: the user's requests
    @property
    def measure_requested(self) -> SignalInstance: ...  # ()
    @property
    def cancel_requested(self) -> SignalInstance: ...  # ()

    # setters
    def set_status(self, text: str) -> None: ...
    def set_running(self, running: bool) -> None: ...
    def set_report(self, report: dict[str, Any] | None) -> None: ...
    def set_stale(self, why: str | None) -> None: ...
