"""FP16 on the CPU provider reads the optimized graph ONNX Runtime saved once: its node
count and the Casts ONNX Runtime inserted come from one load (the warning's check loaded
the graph a second time, after the node count had)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx
import pytest

from engine import backends
from engine.backends.base import PrepareRequest
from engine.config import RunConfig
from engine.events import Notice, VariantReady, drive
from engine.model.workload import Workload
from tests.conftest import DEMO_TRANSFORMER


def test_fp16_on_the_cpu_loads_the_optimized_graph_once(monkeypatch: pytest.MonkeyPatch) -> None:
    loads: list[str] = []
    real_load = onnx.load

    def counting_load(f: Any, *args: Any, **kwargs: Any) -> onnx.ModelProto:
        if isinstance(f, (str, Path)) and Path(f).name == "optimized.onnx":
            loads.append(str(f))
        return real_load(f, *args, **kwargs)

    monkeypatch.setattr(onnx, "load", counting_load)
    config = RunConfig(precision="fp16", provider="cpu", threads=1)
    req = PrepareRequest(Workload(str(DEMO_TRANSFORMER), config))
    events: list[object] = []
    prepared = drive(backends.backend_for(config).prepare(req), events.append)
    try:
        assert len(loads) == 1, loads
        variant = [e for e in events if isinstance(e, VariantReady)][-1]
        assert variant.nodes and variant.nodes > 0  # the count still comes from that load
        said = [
            e.message for e in events if isinstance(e, Notice) and "FP16 on the CPU" in e.message
        ]
        assert len(said) == 1 and "inserted" in said[0] and "Cast node" in said[0]
    finally:
        prepared.close()
