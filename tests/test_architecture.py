"""engine/ is plain Python: importing all of it loads no Qt (napari's contract)."""

import pkgutil
import subprocess
import sys
from pathlib import Path

import engine

ROOT = Path(__file__).resolve().parent.parent


def test_engine_imports_no_qt() -> None:
    modules = [m.name for m in pkgutil.walk_packages(engine.__path__, "engine.")]
    assert "engine.run.bench" in modules
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('PySide6', 'PyQt5', 'PyQt6', 'pyqtgraph', 'shiboken6', 'widgets', 'app'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""


def test_help_needs_no_heavy_imports() -> None:
    """`opscope --help` is instant: no onnxruntime, onnx or torch behind it."""
    code = (
        "import sys\nfrom engine.cli.main import build_parser\nbuild_parser()\n"
        "print(','.join(m for m in ('onnxruntime', 'onnx', 'torch') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""
