"""Live timing paused for the jobs that take the cores (a tune, a sweep, a memory probe, a
layout), held in one place: the workbench mixes this in, and tests' stand-ins for it too."""

from __future__ import annotations

import contextlib


class PauseHolds:
    """Needs `running` and `toggle_running(reason)` from the class it is mixed into."""

    running: bool
    _holds: set[str]

    def toggle_running(self, reason: str = "paused") -> None:  # pragma: no cover - mixed over
        raise NotImplementedError

    def pause_for(self, concern: str, reason: str) -> None:
        """Live timing pauses while the job of `concern` runs, marked on the plot with
        `reason`; timing already paused for another job stays paused until both are done.
        A pause the user made is the user's: no job resumes it."""
        holds = self.__dict__.setdefault("_holds", set())
        if self.running:
            holds.add(concern)
            self.toggle_running(reason)
        elif holds:
            holds.add(concern)

    def resume_after(self, concern: str) -> None:
        """The job of `concern` ended: timing resumes when no other job holds it paused."""
        holds = self.__dict__.setdefault("_holds", set())
        if concern not in holds:
            return
        holds.discard(concern)
        if not holds and not self.running:
            with contextlib.suppress(RuntimeError):  # the window is closing
                self.toggle_running()
