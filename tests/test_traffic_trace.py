"""A trace file in the Traffic dock (issue #28): the Trace file pattern, Browse or a file
dropped on the dock, its speed and start written into the spec a load run and the What-if
read; and the What-if on a trace, scaled by replaying it faster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("PySide6")

from app.traffic.view import TrafficDock
from engine.serve.batching import BatchPolicy
from engine.serve.sim.service import ServiceModel
from engine.serve.sim.what_if import Question, answer
from engine.serve.traffic.schedule import parse_traffic
from tests.file_drops import file_drop

AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
"""


def test_a_trace_dropped_on_the_dock_is_replayed(qtbot: Any, tmp_path: Path) -> None:
    dock = TrafficDock()
    qtbot.addWidget(dock)
    dock.show()
    trace = tmp_path / "azure.csv"
    trace.write_text(AZURE)
    event = file_drop(trace)
    dock.dropEvent(event)
    assert event.isAccepted()
    assert dock.pattern.currentData() == "trace" and dock.trace_path.isVisible()
    assert not dock.rate.isVisible()  # a trace brings its own arrivals
    assert dock.traffic_spec() == f"trace:{trace}"
    dock.trace_speed.setValue(2.0)
    dock.trace_start.setValue(3.0)
    spec = parse_traffic(dock.traffic_spec())
    assert (spec.path, spec.speed, spec.start_s) == (str(trace), 2.0, 3.0)
    assert dock.command().traffic == dock.traffic_spec()
    other = file_drop(tmp_path / "model.onnx")
    dock.dropEvent(other)
    assert not other.isAccepted()  # not a trace: left to the window (it opens models)


def test_the_what_if_replays_a_trace_faster_to_scale_it(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    times = np.cumsum(np.random.default_rng(0).exponential(1 / 100, 4000))
    trace.write_text("time\n" + "\n".join(f"{t:.5f}" for t in times))
    spec = parse_traffic(f"trace:{trace}")
    assert spec.mean_rate() == pytest.approx(100, rel=0.05)
    assert spec.scaled(2.0).speed == 2.0 and spec.scaled(2.0).mean_rate() == pytest.approx(
        2 * spec.mean_rate()
    )
    svc = ServiceModel({1: np.full(10, 2e-3), 4: np.full(10, 4e-3)}, {})
    a = answer(Question(spec, BatchPolicy(max_batch=4), None, slo_ms=20), svc)
    assert a["offered_rate"] == pytest.approx(spec.mean_rate())
    assert a["prediction"]["throughput"]["requests_per_s"] == pytest.approx(100, rel=0.1)
    assert a["max_rate"] > 200  # 4-batches of 4 ms: the trace meets 20 ms well past 2x


def test_a_trace_dropped_on_the_llm_serving_dock_brings_its_lengths(
    qtbot: Any, tmp_path: Path
) -> None:
    from app.llm_serving.view import LLMServingPanel
    from engine.serve.llm.study_plan import plan_workload

    dock = LLMServingPanel()
    qtbot.addWidget(dock)
    trace = tmp_path / "azure.csv"
    trace.write_text(AZURE)
    event = file_drop(trace)
    dock.dropEvent(event)
    assert event.isAccepted() and dock.spec.text() == f"trace:{trace}"
    work = plan_workload(dock.form().plan(), 2048)
    assert list(work.prompt) == [374, 396] and list(work.output) == [44, 109]
