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


def test_a_result_for_a_deleted_receiver_is_dropped(qtbot: QtBot) -> None:
    """A window closed while its room's job ran (the Runs dock reading the session file
    back): the result reaches nobody, where it raised 'Internal C++ object already deleted'
    in the next test's event loop."""
    from PySide6.QtCore import QObject
    from PySide6.QtWidgets import QWidget

    class Receiver(QObject):
        def __init__(self, view: QWidget) -> None:
            super().__init__(view)  # goes with its view, as a room's controller does
            self.view = view
            self.got: list[object] = []

        def done(self, result: object) -> None:
            self.got.append((result, self.view.isVisible()))  # raises on a deleted view

    job = Background("test")
    release = threading.Event()
    view = QWidget()
    receiver = Receiver(view)
    job.submit(lambda: release.wait(5), receiver.done, receiver.done)
    view.deleteLater()
    qtbot.waitUntil(lambda: not _valid(view), timeout=5000)
    release.set()
    qtbot.waitUntil(lambda: not job.busy, timeout=5000)  # delivered, and dropped
    alive_view = QWidget()
    alive = Receiver(alive_view)
    job.submit(lambda: "kept", alive.done, alive.done)
    qtbot.waitUntil(lambda: not job.busy, timeout=5000)
    assert alive.got == [("kept", False)]


def _valid(obj: object) -> bool:
    import shiboken6

    return bool(shiboken6.isValid(obj))
