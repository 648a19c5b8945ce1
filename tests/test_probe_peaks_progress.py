"""`opscope system --remeasure` says what it is measuring, phase by phase: on a busy machine
its "a few seconds" took over a minute with that one line and nothing after it (found by
bench/probe_fuzz.py: silent past its 45 s timeout at a load average of 30)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.cli.main import main
from engine.machine.peaks import PROGRESS_HOOK


def test_remeasuring_the_peaks_says_each_phase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path))  # the user's cached peaks untouched
    assert main(["system", "--remeasure", "--json", str(tmp_path / "system.json")]) == 0
    err = capsys.readouterr().err.splitlines()
    phases = [line for line in err if line.startswith("[peaks] ")]
    assert [p.split(":")[0] for p in phases] == [f"[peaks] {k}/5" for k in range(1, 6)], err
    assert PROGRESS_HOOK == []  # the command's own: cleared when it ends
