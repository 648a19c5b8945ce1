"""An engine client whose reader thread outlives its shutdown (app/host/engine_client.py) is
kept to the process's end: the window dropping it must not leave the reader thread holding
the last reference, which would delete the QObject there, off the GUI thread."""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import pytest

from app.host import engine_client
from app.host.engine_client import EngineClient

pytestmark = pytest.mark.usefixtures("qapp")


class _Ended:
    """A host process that has already exited."""

    def is_alive(self) -> bool:
        return False

    def join(self, timeout: float | None = None) -> None:
        return None


def _client_with_reader(monkeypatch: pytest.MonkeyPatch, release: threading.Event) -> Any:
    monkeypatch.setattr(engine_client, "READER_END_S", 0.05)
    monkeypatch.setattr(engine_client, "_OUTLIVED", [])
    client = EngineClient()
    client._proc = _Ended()  # type: ignore[assignment]
    client._reader = threading.Thread(target=lambda c=client: release.wait(30), daemon=True)
    client._reader.start()
    return client


def test_a_reader_still_running_after_shutdown_keeps_its_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = threading.Event()
    client = _client_with_reader(monkeypatch, release)
    reader = client._reader
    client.shutdown()
    assert [client] == engine_client._OUTLIVED
    ref = weakref.ref(client)
    del client
    gc.collect()
    release.set()
    reader.join(10)
    assert ref() is not None  # the reader did not hold the last reference


def test_a_reader_that_ended_leaves_nothing_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    release.set()
    client = _client_with_reader(monkeypatch, release)
    client._reader.join(10)
    client.shutdown()
    assert engine_client._OUTLIVED == []


def test_a_client_that_ran_an_ssh_link_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """The link's sender thread and its window-side jobs hold the client too."""
    from app.host.remote_link import RemoteLink

    class EndedLink(RemoteLink):
        def __init__(self) -> None:  # no ssh: a link that has ended
            pass

        def is_alive(self) -> bool:
            return False

        def join(self, timeout: float | None = None) -> None:
            return None

    monkeypatch.setattr(engine_client, "_OUTLIVED", [])
    client = EngineClient()
    client._proc = EndedLink()
    client.shutdown()
    assert engine_client._OUTLIVED.count(client) == 1
