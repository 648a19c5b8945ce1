"""A host's half-received files (engine/remote/host_side.py): a receiver removes its own part
when its sender stops; one killed outright cannot, so the next receive removes the parts of
receivers no longer running, and only those."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.remote import host_side
from engine.remote.host_side import receive, sweep_stale_parts


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_only_the_parts_of_receivers_gone_are_removed(tmp_path: Path) -> None:
    dead = tmp_path / f"model.onnx.{_dead_pid()}.part"
    mine = tmp_path / f"model.onnx.{os.getpid()}.part"
    running = tmp_path / f"model.onnx.{os.getppid()}.part"
    odd = tmp_path / "model.part"  # no pid: not one of ours
    for p in (dead, mine, running, odd):
        p.write_bytes(b"x")
    assert sweep_stale_parts(tmp_path) == 1
    assert not dead.exists() and mine.exists() and running.exists() and odd.exists()


def test_a_receive_sweeps_before_it_writes_and_a_short_stream_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(host_side, "received_root", lambda: tmp_path)
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    stale = incoming / f"big.onnx.{_dead_pid()}.part"
    stale.write_bytes(b"half")
    out = io.StringIO()
    with pytest.raises(host_side.ConfigError, match="ended 6 bytes early"):
        receive("-", 10, "small.onnx", io.BytesIO(b"abcd"), out)  # the sender stopped
    assert not stale.exists()
    assert list(incoming.iterdir()) == []
