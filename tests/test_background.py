"""The window's one way to run work off the GUI thread: results on the GUI thread, newer
jobs supersede older ones, errors as one line."""

from __future__ import annotations

import threading
import time

from pytestqt.qtbot import QtBot

from app.host.background import Background
from engine.errors import ModelError


def test_result_arrives_on_the_gui_thread_and_newer_jobs_win(qtbot: QtBot) -> None:
    job = Background("test")
    got: list[tuple[str, object, bool]] = []
    gui = threading.get_ident()

    def slow() -> str:
        time.sleep(0.3)
        return "old"

    job.submit(slow, lambda r: got.append(("done", r, threading.get_ident() == gui)), print)
    job.submit(
        lambda: "new", lambda r: got.append(("done", r, threading.get_ident() == gui)), print
    )
    qtbot.waitUntil(lambda: not job.busy, timeout=5000)
    qtbot.wait(500)  # the superseded job finishes meanwhile, unheard
    assert got == [("done", "new", True)]


def test_errors_reach_on_error_as_one_line(qtbot: QtBot) -> None:
    job = Background("test")
    errors: list[str] = []

    def bad_model() -> None:
        raise ModelError("corrupt protobuf", "m.onnx")

    def bug() -> None:
        raise KeyError("x")

    job.submit(bad_model, print, errors.append)
    qtbot.waitUntil(lambda: len(errors) == 1, timeout=5000)
    job.submit(bug, print, errors.append)
    qtbot.waitUntil(lambda: len(errors) == 2, timeout=5000)
    assert errors == ["m.onnx: corrupt protobuf", "internal error: KeyError('x')"]
