"""`opscope --self-test`: the post-install check ops staff run (also inside the bundle)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli import selftest

ROOT = Path(__file__).resolve().parent.parent


def test_self_test_subprocess_exit_zero_prints_provider_and_latency(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "app.entry", "--self-test"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    m = re.search(
        r"opscope self-test: OK provider=(\w+ExecutionProvider) runs=20 "
        r"p50=([\d.]+) ms p99=([\d.]+) ms",
        proc.stdout,
    )
    assert m, proc.stdout + proc.stderr
    assert float(m.group(2)) > 0
    # The temporary session is cleaned up (ONNX Runtime itself leaves a small `.ses` file).
    assert not list(tmp_path.rglob("*.opscope*"))


def test_self_test_failure_is_one_line_and_nonzero(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setattr(selftest, "demo_model_path", lambda: str(tmp_path / "missing.onnx"))
    assert selftest.main() == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("opscope self-test: FAILED: RuntimeError: bundled demo model missing")
    assert "\n" not in err
