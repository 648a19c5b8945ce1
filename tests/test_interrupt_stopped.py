"""engine/interrupt.py `stopped`: a native call's failure is a stop when a signal arrived or
when its command ended while it ran. `unwatch` clears `received` as the command ends, and
under load a worker's run that the interruption stopped failed only after that: it read as
a plain failure, and the stopped session was let go to its slow teardown
(tests/test_signals_teardown.py failed 3 of 12 runs beside two busy processes)."""

from __future__ import annotations

from engine import interrupt


def test_a_call_across_its_commands_end_was_stopped() -> None:
    since = interrupt.command_count()
    assert not interrupt.stopped(since)  # running, nothing arrived
    interrupt.unwatch()  # the command ended (it clears `received`)
    assert not interrupt.received.is_set()
    assert interrupt.stopped(since)
    assert not interrupt.stopped(interrupt.command_count())  # the next command's call


def test_a_signal_is_a_stop() -> None:
    since = interrupt.command_count()
    interrupt.mark("SIGINT")
    try:
        assert interrupt.stopped(since)
    finally:
        interrupt.unwatch()
