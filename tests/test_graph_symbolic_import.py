"""ONNX Runtime's symbolic shape inference (the graph view's and the memory sizes' second
shape inference) without PyTorch: onnxruntime.tools' package imports PyTorch wherever it is
installed, the largest step of the window's graph job on a busy machine (issue 53)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DEMO_CNN, DEMO_TRANSFORMER, ROOT


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch not installed")
def test_the_symbolic_shape_inference_imports_no_pytorch() -> None:
    """ONNX Runtime's tools package imports PyTorch wherever it is installed: 1.4 of the 1.7
    CPU-seconds the symbolic inference took before its first shape."""
    code = (
        "import sys\n"
        "from engine.backends.ort.shape_infer import symbolic_shapes\n"
        "from engine.model.info import load_model\n"
        "from engine.model.memory_need import at_shapes, inferred_sizes\n"
        f"model, _ = load_model({str(DEMO_TRANSFORMER)!r})\n"
        "out = symbolic_shapes(at_shapes(model, {}))\n"
        "assert out is not None and inferred_sizes(out), 'no shapes'\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", done.stdout[-500:]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch not installed")
def test_the_int8_pre_processing_imports_no_pytorch(tmp_path: Path) -> None:
    """ONNX Runtime's quant_pre_process (before every INT8 build) imports the same module
    through onnxruntime.tools' package: 2.4 CPU-seconds of PyTorch per process that builds
    an INT8 variant (a window's host, a tune's trial, `opscope bench --precision int8-*`)."""
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from engine.backends.ort.variants import _preprocess\n"
        "from engine.model.info import load_model\n"
        f"_, info = load_model({str(DEMO_CNN)!r})\n"
        "steps = _preprocess(info, Path(sys.argv[1]))\n"
        "try:\n"
        "    while True:\n"
        "        next(steps)\n"
        "except StopIteration as done:\n"
        "    assert done.value.name == 'preprocessed.onnx', done.value\n"
        "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", done.stdout[-500:]
