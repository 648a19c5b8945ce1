"""What the Scaling room's controller needs of its view (app/scaling/view.py is the real
one; tests use `MagicMock(spec=ScalingViewPort)`)."""

from __future__ import annotations

from typing import Any, Protocol

from PySide6.QtCore import SignalInstance


class ScalingViewPort(Protocol):
    # signals: the user's requests
    @property
    def run_requested(self) -> SignalInstance: ...  # ()
    @property
    def cancel_requested(self) -> SignalInstance: ...  # ()

    # what the user picked
    def dim_text(self) -> str: ...
    def values_text(self) -> str: ...
    def status_text(self) -> str: ...

    # setters
    def set_dims(self, dims: list[str]) -> None: ...
    def set_values(self, text: str) -> None: ...
    def set_status(self, text: str) -> None: ...
    def set_running(self, running: bool) -> None: ...
    def set_sweep(self, data: dict[str, Any]) -> None: ...
    def set_prompt_sweep(
        self, points: list[dict[str, Any]], fit: tuple[float, float, float] | None = None
    ) -> None: ...
