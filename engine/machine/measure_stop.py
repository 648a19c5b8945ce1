"""A long measurement of the machine (its peaks: a few seconds quiet, a minute or more on a
busy machine) stopped part-way when its caller must end: the engine host told to close
while it measures. Before, the host finished the measurement first, the window's wait for
it ran out (20 s) and killed it, and its live run stayed "cancelled: recording closed
before the run ended" in the session, without its summary (tests/test_cli_signals.py under
load). Checked between a measurement's repeats and phases; `STOP_HOOK` is a list that the
caller sets and clears, as engine.machine.peaks.PROGRESS_HOOK."""

from __future__ import annotations

from collections.abc import Callable

STOP_HOOK: list[Callable[[], bool]] = []


class MeasurementStopped(BaseException):
    """The caller asked the measurement to stop: nothing of it is kept. Not an Exception:
    the measurement's own `except Exception` (a failed ONNX Runtime roof, a broken GPU)
    would keep what it had and go on."""


def check() -> None:
    """Raise MeasurementStopped when a caller asks the measurement to stop."""
    if any(asks() for asks in STOP_HOOK):
        raise MeasurementStopped
