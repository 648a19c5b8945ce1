"""The graph job reads the model once before its first graph: neither onnx.checker (a second
read and a full check) nor the files' SHA-256 (a third read), whose results the graph never
shows, stand before it (0.2 of MiniLM's 0.5 CPU-s to the first graph on a busy machine:
bench/results/graph_start.md)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import onnx
import pytest

from engine.model import info as model_info
from engine.model.workload import Workload
from engine.run.graph_job import GraphRequest, GraphSoFar, graph_job
from tests.conftest import DEMO_TRANSFORMER


def test_the_first_graph_needs_no_checker_and_no_hash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "fresh.onnx"  # a file no cache in this process has seen
    shutil.copyfile(DEMO_TRANSFORMER, model)
    calls: list[str] = []
    checker, digest = onnx.checker.check_model, model_info.files_sha256

    def checked(*args: Any, **kwargs: Any) -> Any:
        calls.append("checker")
        return checker(*args, **kwargs)

    def hashed(files: list[Path]) -> str:
        calls.append("sha256")
        return digest(files)

    monkeypatch.setattr(onnx.checker, "check_model", checked)
    monkeypatch.setattr(model_info, "files_sha256", hashed)
    gen = graph_job(GraphRequest(Workload(str(model)), low_priority=True))
    try:
        first = next(e for e in gen if isinstance(e, GraphSoFar))
    finally:
        gen.close()
    assert first.result["views"]["loaded"]["nodes"]
    assert calls == []
    # `opscope info` and the live engine still check and hash
    _, described = model_info.load_model(model)
    assert described.sha256 and calls == ["checker", "sha256"]
