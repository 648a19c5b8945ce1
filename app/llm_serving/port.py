"""What the LLM Serving room's controller needs of its view (app/llm_serving/view.py is the
real one) and of its dock (the QDockWidget the desk made: shown while a generating model
runs); tests use `MagicMock(spec=LLMServingViewPort)` and `MagicMock(spec=DockFrame)`."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import SignalInstance

from widgets.models.llm_serving_form import ServingForm
from widgets.models.llm_serving_table import LLMServingTable


class LLMServingViewPort(Protocol):
    # signals: the user's requests
    @property
    def simulate_requested(self) -> SignalInstance: ...  # ()
    @property
    def remeasure_requested(self) -> SignalInstance: ...  # (): Measure again
    @property
    def real_requested(self) -> SignalInstance: ...  # ()
    @property
    def cancel_requested(self) -> SignalInstance: ...  # ()
    @property
    def settings_changed(self) -> SignalInstance: ...  # (): a value a simulation reads
    @property
    def live_toggled(self) -> SignalInstance: ...  # (bool): Live ticked or not

    # what the view holds, and its setters
    def form(self) -> ServingForm: ...
    def live_on(self) -> bool: ...
    def set_running(self, running: bool) -> None: ...
    def show_progress(self, done: float, total: float | None, message: str) -> None: ...
    def set_status(self, text: str, level: str = "info") -> None: ...
    def show_table(
        self, table: LLMServingTable, slo_ttft: float | None, slo_tpot: float | None
    ) -> None: ...


class DockFrame(Protocol):
    """The room's dock: shown (and raised) while a generating model runs, else hidden."""

    def show(self) -> None: ...
    def hide(self) -> None: ...
    def raise_(self) -> None: ...
    def isVisible(self) -> bool: ...
