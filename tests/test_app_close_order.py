"""The window closed (File > Quit, `kill`, a closed terminal) while the engine host
measures the machine's peaks (the first profiling pass with none cached: a minute or more
on a busy machine): the window's close (Workbench.shutdown: the client's shutdown, then
the recording's close) records the live run as it ended, status ok with its summary.
Before, the host finished measuring first, the window's 20 s wait ran out and killed it,
and the run stayed "cancelled: recording closed before the run ended"
(tests/test_cli_signals.py::test_a_signal_closes_the_app_as_its_window_does, under load)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from app.host.engine_client import EngineClient
from app.sessions.recording import Recording
from engine.api import PeaksMeasured, Progress
from engine.session.reader import SessionReader
from tests.conftest import DEMO_CNN


def test_a_close_while_the_host_measures_peaks_records_the_run_ok(
    qapp: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))  # none cached
    recording = Recording(tmp_path / "s.opscope")
    seen: list[Any] = []
    measuring = threading.Event()

    def sink(batch: list[Any]) -> None:  # the reader thread: recorded, then looked at
        recording.sink(batch)
        seen.extend(batch)
        if any(isinstance(e, Progress) and e.stage == "peaks" and e.done == 0 for e in batch):
            measuring.set()

    client = EngineClient(sink=sink)
    client.start()
    host = client._proc
    try:
        client.load(str(DEMO_CNN))
        assert measuring.wait(120), [type(e).__name__ for e in seen[-10:]]
        asked = len(seen)
    finally:
        client.shutdown()  # as Workbench.shutdown: the host ends, then the recording closes
        recording.close()
    assert host is not None and host.exitcode == 0  # it ended; not killed after its wait
    assert not any(isinstance(e, PeaksMeasured) for e in seen[asked:])  # stopped part-way
    with SessionReader.open(tmp_path / "s.opscope") as reader:
        (run,) = reader.runs()
        assert run.status == "ok" and run.latency is not None and run.samples > 0


class _Proc:
    """A host process as the reader sees it: its joins counted."""

    def __init__(self) -> None:
        self.joins = 0
        self.exitcode = 0

    def join(self, timeout: float | None = None) -> None:
        self.joins += 1


class _Ended:
    def recv(self) -> Any:
        raise EOFError


def test_the_reader_leaves_a_closing_hosts_reaping_to_shutdown(qapp: Any) -> None:
    """At the pipe's end the reader joined the host while `shutdown` joined it too: the
    loser's waitpid got ECHILD and read as alive, so shutdown said killed and sent a kill
    to a process already reaped (seen 1 in 20 closes under load). While closing, the
    reader does not join; a host that dies unasked is still joined and told."""
    client = EngineClient()
    died: list[str] = []
    client.host_died.connect(died.append)
    proc = _Proc()
    client._closing = True
    client._read(_Ended(), proc, client._generation)  # type: ignore[arg-type]
    assert proc.joins == 0
    client._closing = False
    client._read(_Ended(), proc, client._generation)  # type: ignore[arg-type]
    qapp.processEvents()
    assert proc.joins == 1 and died == ["the engine host exited with code 0"]
