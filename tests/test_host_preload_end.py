"""The engine host imports onnx on a thread of its own while it waits for its first command
(engine/run/host.py `preload`). A host that ended meanwhile (a window closed at once, a
remote host given garbage) finalized the interpreter beside that half-done C++ import, which
can abort the process ("terminate called without an active exception", exit -6: 2 of 1,452
`remote host` runs in the stop-61 probe fuzz). The host now waits for the import to end."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import engine.run.host as host


class _Closed:
    """A channel whose window is gone: the host's first receive ends it."""

    def poll(self, *_: Any) -> bool:
        return True

    def recv(self) -> Any:
        raise EOFError

    def send(self, *_: Any) -> None:
        raise BrokenPipeError

    def close(self) -> None:
        pass


def test_a_host_that_ends_at_once_waits_for_its_preload(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    started: list[threading.Thread] = []

    def slow_preload(modules: tuple[str, ...] = host.PRELOAD) -> threading.Thread:
        thread = threading.Thread(target=lambda: release.wait(3), daemon=True)
        thread.start()
        started.append(thread)
        return thread

    monkeypatch.setattr(host, "preload", slow_preload)
    monkeypatch.setattr(host, "as_channel", lambda pipe: pipe)
    threading.Timer(0.5, release.set).start()
    host.host_main(_Closed(), 0.1, samplers=[])
    assert started and not started[0].is_alive()  # before: still importing when it ended
