"""The one way the window runs work off the GUI thread: `Background.submit(fn, on_done,
on_error)` runs `fn` on a worker thread and calls back on the GUI thread. One job per
concern: a newer submit supersedes the older one, whose result is dropped when it arrives
(a generation counter, as ndv does). Errors a user can act on (OpScopeError, OSError)
reach `on_error` as one line; anything else too, marked as an internal error, with the
traceback on stderr. A result whose receiver was deleted meanwhile (a window closed while
its room read the session file back) is dropped, not delivered to the dead object.

The worker never touches this QObject: it holds a weak reference, and its result reaches
the GUI thread through the relay (app/host/gui_relay.py), which looks there whether the
Background still exists. Emitting on the Background itself raced its deletion with the
window (a segfault: tests/test_background_race.py). `fn` should hold no window of its own
(a bound method of a widget inside one is fine: its window owns it)."""

from __future__ import annotations

import functools
import threading
import traceback
import weakref
from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import QObject, Signal

from app.host import gui_relay
from engine.api import OpScopeError


class Background(QObject):
    """Runs one job at a time for one concern (a comparison, an export)."""

    busy_changed = Signal(bool)

    def __init__(self, name: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.generation = 0
        self._callbacks: dict[int, tuple[Callable[[Any], None], Callable[[str], None]]] = {}
        gui_relay.install()

    @property
    def busy(self) -> bool:
        return bool(self._callbacks)

    def submit(
        self,
        fn: Callable[[], Any],
        on_done: Callable[[Any], None],
        on_error: Callable[[str], None],
    ) -> int:
        """Start `fn` on a worker thread; returns its generation."""
        self.generation += 1
        gen = self.generation
        self._callbacks = {gen: (on_done, on_error)}  # older jobs finish unheard
        self.busy_changed.emit(True)
        threading.Thread(
            target=_work,
            args=(weakref.ref(self), gen, fn),
            name=f"opscope-{self.name}-{gen}",
            daemon=True,
        ).start()
        return gen

    def cancel(self) -> None:
        """Forget the running job: its result, when it comes, is dropped (the thread runs
        on to its end; nothing here can stop it)."""
        self.generation += 1
        if self._callbacks:
            self._callbacks = {}
            self.busy_changed.emit(False)

    def _deliver(self, gen: int, ok: bool, result: object) -> None:
        callbacks = self._callbacks.pop(gen, None)
        if callbacks is None:
            return  # superseded
        self.busy_changed.emit(False)
        on_done, on_error = callbacks
        if not _alive(on_done if ok else on_error):
            return
        if ok:
            on_done(result)
        else:
            on_error(str(result))


def _work(owner: weakref.ref[Background], gen: int, fn: Callable[[], Any]) -> None:
    """On the worker thread: `fn`, then its outcome to the GUI thread."""
    try:
        result: Any = fn()
        ok = True
    except (OpScopeError, OSError) as exc:
        result, ok = str(exc), False
    except Exception as exc:  # a bug: say so in one line, keep the traceback
        traceback.print_exc()
        result, ok = f"internal error: {exc!r}", False
    gui_relay.to_gui_thread(functools.partial(_arrived, owner, gen, ok, result))


def _arrived(owner: weakref.ref[Background], gen: int, ok: bool, result: object) -> None:
    """On the GUI thread: the outcome to its Background, if the window kept it."""
    background = owner()
    if background is not None and shiboken6.isValid(background):
        background._deliver(gen, ok, result)


def _alive(callback: Callable[..., None]) -> bool:
    """Whether a callback's receiver still exists: a bound method of a QObject whose C++
    object was deleted (the Runs dock's controller, gone with its closed window) is not."""
    owner = getattr(callback, "__self__", None)
    return not isinstance(owner, QObject) or shiboken6.isValid(owner)
