"""What the Runs room's controller needs of its view (widgets/runs_table.py's RunsTable is
the real one; tests use `MagicMock(spec=RunsViewPort)`)."""

from __future__ import annotations

from typing import Protocol


class RunsViewPort(Protocol):
    def isVisible(self) -> bool: ...
    def refresh(self) -> None: ...  # repainted from the summary it was made with
    # each summary row's run id in the session file (None: not recorded) and kind
    def set_runs(self, ids: list[int | None], kinds: list[str]) -> None: ...
