"""What the Tune room's controller needs of its view (app/tune/view.py is the real one;
tests use `MagicMock(spec=TuneViewPort)`)."""

from __future__ import annotations

from typing import Any, Protocol

from PySide6.QtCore import SignalInstance


class TuneViewPort(Protocol):
    # signals: the user's requests
    @property
    def start_requested(self) -> SignalInstance: ...  # ()
    @property
    def cancel_requested(self) -> SignalInstance: ...  # ()
    @property
    def trial_chosen(self) -> SignalInstance: ...  # (int): a trial's number, to apply

    # what the view holds
    def space_items(self) -> list[str]: ...  # the space as `--space` items
    def objective_key(self) -> str: ...  # "p50", "p99", "throughput"
    def budget_trials(self) -> int | None: ...  # None: every config
    def trial_seconds(self) -> float: ...

    # setters
    def set_running(self, running: bool) -> None: ...
    def show_progress(self, done: float, total: float | None, message: str) -> None: ...
    def set_summary(self, text: str) -> None: ...
    def clear(self) -> None: ...
    def add_trial(self, row: dict[str, Any]) -> None: ...
    def set_floor(self, cosine: float) -> None: ...
    def set_trials(
        self, points: list[tuple[int, float, float]], front: list[int], best: int | None
    ) -> None: ...
