"""Live timing paused for jobs (app/shell/pause_holds.py): two jobs at once keep it paused
until both end, a pause the user made is never resumed by a job."""

from __future__ import annotations

from app.shell.pause_holds import PauseHolds


class Timing(PauseHolds):
    def __init__(self) -> None:
        self.running = True
        self.marks: list[str] = []

    def toggle_running(self, reason: str = "paused") -> None:
        self.running = not self.running
        self.marks.append(reason if not self.running else "resumed")


def test_two_jobs_hold_the_pause_until_both_end() -> None:
    t = Timing()
    t.pause_for("tune", "paused: tuning")
    t.pause_for("graph", "paused: laying out the graph")  # already paused: joins
    assert t.marks == ["paused: tuning"] and not t.running
    t.resume_after("tune")
    assert not t.running  # the graph job still holds it
    t.resume_after("graph")
    assert t.running and t.marks == ["paused: tuning", "resumed"]


def test_a_pause_the_user_made_stays() -> None:
    t = Timing()
    t.toggle_running("paused")  # the user's Ctrl+Space
    t.pause_for("memory", "paused: measuring memory")
    t.resume_after("memory")
    assert not t.running and t.marks == ["paused"]
