"""The window keeps a profiling pass's figures, not its raw trace (issue 54). A live pass on
the 106-node demo transformer carries every node's execution in each of its 20 profiled
inferences (2,120 NodeEvents, ~2.7 MB of Python objects once decoded). The recorder writes
them to the session in the reader's thread before the window sees the batch; nothing in the
window reads them afterwards, yet the live controller kept the last pass whole (and at each
new pass two of them were alive). An LLM's phase profiles likewise."""

from __future__ import annotations

import gc
from typing import Any

import pytest

pytest.importorskip("PySide6")

from engine.config import RunConfig
from engine.events import OpProfile, RunStarted
from engine.measure.op_stats import OpStat
from engine.measure.op_trace import NodeEvent, ProfileTrace, RunSpan

RUNS, NODES = 20, 106


def profiling_pass(phase: str | None = None) -> OpProfile:
    """A live profiling pass as the host sends it: every node's execution in every one of
    its inferences, and its figures (tests/test_window_memory_census.py decodes it too)."""
    shapes = (("float", (1, 128, 256)),)
    names = [f"/layer{i // 8}/node{i}" for i in range(NODES)]
    nodes = tuple(
        NodeEvent(
            r,
            names[i],
            "MatMul",
            "CPUExecutionProvider",
            10.0 * i,
            9.0,
            shapes,
            shapes,
            1024,
            2048,
            512,
            node_index=i,
        )
        for r in range(RUNS)
        for i in range(NODES)
    )
    trace = ProfileTrace(
        runs=tuple(RunSpan(r, 1000.0 * r, 900.0) for r in range(RUNS)), nodes=nodes
    )
    ops = [
        OpStat(
            n,
            "MatMul",
            "CPUExecutionProvider",
            1,
            0.1,
            0.1,
            0.1,
            1 / NODES,
            3584,
            1.0,
            10_000,
            1.0,
            2.8,
        )
        for n in names
    ]
    return OpProfile(ops, ops[:1], 0.97, RUNS, {"CPUExecutionProvider": NODES}, trace, 0.05, phase)


def _node_events() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is NodeEvent)


def test_the_window_drops_a_pass_trace_once_shown(qapp: Any, tmp_path: Any) -> None:
    from app.shell.workbench import Workbench

    before = _node_events()  # what earlier tests in this process left (one, in a full run)
    wb = Workbench(session_path=str(tmp_path / "s.opscope"), usable=["cpu"])
    try:
        started = RunStarted(RunConfig(), "cpu", "CPUExecutionProvider", (), {}, 1, 0.1)
        wb.client.events.emit([started])
        for phase in (None, None, "decode"):  # live passes, then an LLM's phase profile
            wb.client.events.emit([profiling_pass(phase)])  # to every part of the window, as live
            qapp.processEvents()
        held = _node_events() - before
        assert held <= 0, f"the window holds {held:,} NodeEvents of a pass's raw trace"
        for shown in (wb.controller.last_profile, wb.generation.phases.get("decode")):
            assert shown is not None and len(shown.ops) == NODES  # the figures stay
            assert shown.runs == RUNS and shown.coverage == pytest.approx(0.97)
    finally:
        wb.shutdown()
