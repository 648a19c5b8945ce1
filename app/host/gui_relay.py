"""The one way a worker thread hands work to the GUI thread: `to_gui_thread(fn)` runs `fn`
there, through one QObject that lives as long as the process.

A worker that emits a signal on a QObject of the window races the GUI thread deleting that
object (a window closed while its comparison ran): PySide checks the object is alive, then
Qt reads it, and a deletion in between is a segfault, on either thread
(tests/test_background_race.py crashed 7 runs of 7 before). Emitting on the relay, which is
never deleted, cannot race; the callable, on the GUI thread, looks at its receiver there.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal


class _Relay(QObject):
    call = Signal(object)

    def __init__(self) -> None:
        super().__init__()
        self.call.connect(self._run, Qt.ConnectionType.QueuedConnection)

    def _run(self, fn: Callable[[], None]) -> None:
        fn()


_relay: _Relay | None = None


def install() -> None:
    """Make the relay, on the GUI thread (each Background does, as it is made there); kept
    for the process's life."""
    global _relay
    if _relay is not None:
        return
    relay = _Relay()
    app = QCoreApplication.instance()
    if app is not None and QThread.currentThread() is not app.thread():
        relay.moveToThread(app.thread())  # made off the GUI thread: it runs calls there
    _relay = relay


def to_gui_thread(fn: Callable[[], None]) -> bool:
    """Run `fn` on the GUI thread, from any thread; False where no relay was installed."""
    relay = _relay
    if relay is None:
        return False
    relay.call.emit(fn)
    return True
