"""The CLI's signal watcher (engine/interrupt.py `watch`) belongs to one command: run
inside another program (a test worker, a caller), a command leaves no watcher behind.
One that stayed made a later Ctrl-C in that program set ONNX Runtime's `terminate` for
good (every later run failed) and leave `received` set (the next native call raised
KeyboardInterrupt at once: a pytest worker went down with the suite)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import numpy as np
import pytest

from engine import interrupt
from engine.backends.ort.inference_session import stoppable_run_options, stoppable_session_class
from engine.cli.main import main
from tests.conftest import DEMO_CNN


@pytest.fixture
def clean() -> Iterator[None]:
    """Ctrl+C as a terminal's process has it (a runner started in the background has it
    ignored); what the test watched undone after it."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    interrupt.unwatch()
    signal.signal(signal.SIGINT, before)


def _run_demo() -> None:
    sess = stoppable_session_class()(str(DEMO_CNN), providers=["CPUExecutionProvider"])
    feed = {
        i.name: np.zeros([d if isinstance(d, int) else 1 for d in i.shape], np.float32)
        for i in sess.get_inputs()
    }
    sess.run(None, feed)  # the stoppable run options: fails if `terminate` is left set


def test_a_command_run_in_process_leaves_no_watcher_behind(
    clean: None, capsys: pytest.CaptureFixture[str]
) -> None:
    stoppable_run_options()  # its stop registered, as any run of the process does
    assert main(["info", str(DEMO_CNN)]) == 0
    capsys.readouterr()
    with pytest.raises(KeyboardInterrupt):  # the program's own Ctrl-C, later
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(2.0)
    time.sleep(0.3)  # a watcher left behind has marked it by now
    assert not interrupt.received.is_set()
    assert not stoppable_run_options().terminate
    _run_demo()


def test_a_signal_that_stops_nothing_marks_nothing(clean: None) -> None:
    """A timer's or a user signal with a Python handler reaches the wakeup fd too."""
    got: list[int] = []
    before = signal.signal(signal.SIGUSR2, lambda signum, _frame: got.append(signum))
    try:
        interrupt.watch()
        os.kill(os.getpid(), signal.SIGUSR2)
        time.sleep(0.3)
        assert got == [signal.SIGUSR2]
        assert not interrupt.received.is_set()
        assert not stoppable_run_options().terminate
    finally:
        signal.signal(signal.SIGUSR2, before)


def test_unwatch_puts_back_what_a_stop_changed(clean: None) -> None:
    interrupt.watch()
    stoppable_run_options()
    before = signal.signal(signal.SIGINT, lambda *_: None)  # marked, not raised, here
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.3)
        assert interrupt.received.is_set() and stoppable_run_options().terminate
    finally:
        signal.signal(signal.SIGINT, before)
    interrupt.unwatch()
    assert not interrupt.received.is_set() and not stoppable_run_options().terminate
    assert signal.set_wakeup_fd(-1) == -1  # the wakeup fd as it was before
    _run_demo()
