"""tools/check_env.py must fail a mixed onnxruntime + onnxruntime-gpu install (they share a
folder and overwrite each other). The second package is faked with a bare .dist-info folder
on PYTHONPATH, so nothing real is installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_check(extra_path: Path | None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if extra_path is not None:
        env["PYTHONPATH"] = str(extra_path)
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "check_env.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_check_env_passes_on_this_venv() -> None:
    proc = run_check(None)
    assert proc.returncode == 0, proc.stderr
    assert "check_env: onnxruntime-gpu" in proc.stdout


def test_check_env_fails_on_mixed_install(tmp_path: Path) -> None:
    info = tmp_path / "onnxruntime-1.31.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: onnxruntime\nVersion: 1.31.1\n")
    proc = run_check(tmp_path)
    assert proc.returncode == 1
    assert "expected exactly one ONNX Runtime package" in proc.stderr
    assert "'onnxruntime', 'onnxruntime-gpu'" in proc.stderr


def test_check_env_ignores_genai(tmp_path: Path) -> None:
    """onnxruntime-genai-cuda (the `genai` extra) runs on onnxruntime-gpu: not a second runtime."""
    info = tmp_path / "onnxruntime_genai_cuda-0.18.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: onnxruntime-genai-cuda\nVersion: 0.18.0\n"
    )
    proc = run_check(tmp_path)
    assert proc.returncode == 0, proc.stderr
