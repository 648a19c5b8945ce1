"""The real window, fed a long live run's profiling passes in-process (issue 54): what it
holds stops growing once the pause log is full. Each pass brings a pause marker, samples
and a 106-node OpProfile (the demo transformer's size) to the live controller, which draws
it in the op table, the roofline, the graph's figures and a pause band on both plots.

Stop 61's census counted ~230 dicts and ~180 lists more per pass (Profile Now every 8 s);
stop 62 found that figure was one snapshot taken while the wire reader decoded a profile
(json.loads of the batch: +20.7k dicts, +16.3k lists, gone a moment later), not growth.
This keeps it so: once the pause log is full (its cap made small here), a pass leaves
nothing behind; it fails on the code before the pause-band fix (6f80b15: +1,000 lists,
+320 scene items over 40 passes)."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

pytest.importorskip("PySide6")

import widgets.models.pauses
from engine.config import RunConfig
from engine.events import LatencyBatch, Marker, OpProfile, RunStarted
from engine.measure.op_stats import OpStat

NODES = 106  # the demo transformer's


def _profile(k: int) -> OpProfile:
    """Pass k's figures: every node's numbers move a little from pass to pass, as live."""
    rng = np.random.default_rng(k)
    shares = rng.dirichlet(np.ones(NODES))
    types = ("MatMul", "Add", "Softmax", "LayerNormalization", "Reshape", "Gelu")
    ops = [
        OpStat(
            name=f"/layer{i // 8}/node{i}",
            op_type=types[i % len(types)],
            provider="CPUExecutionProvider",
            calls=1,
            time_ms=float(s) * 4.0,
            p50_ms=float(s) * 4.0,
            p99_ms=float(s) * 5.0,
            share=float(s),
            bytes=1000 + i,
            gbps=1.0 + float(s),
            flops=None if i % len(types) == 4 else 10_000 + i,
            gflops=None if i % len(types) == 4 else 1.0 + 50 * float(s),
            intensity=None if i % len(types) == 4 else 0.5 + i / 10,
        )
        for i, s in enumerate(shares)
    ]
    return OpProfile(ops, ops[:6], 0.97, 8, {"CPUExecutionProvider": NODES}, None, 0.05)


def _held(app: Any) -> dict[str, int]:
    from PySide6.QtWidgets import QGraphicsView

    gc.collect()
    kinds: dict[str, int] = {}
    for o in gc.get_objects():
        name = type(o).__name__
        kinds[name] = kinds.get(name, 0) + 1
    scenes = {id(w.scene()): w.scene() for w in app.allWidgets() if isinstance(w, QGraphicsView)}
    kinds["[scene items]"] = sum(len(s.items()) for s in scenes.values() if s is not None)
    return kinds


def test_a_profiling_pass_leaves_nothing_behind_past_the_pause_log(
    qapp: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.shell.workbench import Workbench

    keep = 16  # the log's cap made smaller, so it fills in a few seconds (64 in the app)
    monkeypatch.setattr(widgets.models.pauses, "MAX_PAUSES", keep)

    wb = Workbench(session_path=str(tmp_path / "s.opscope"), usable=["cpu"])
    try:
        ctl = wb.controller
        t0 = ctl.t0_ns
        started = RunStarted(RunConfig(), "cpu", "CPUExecutionProvider", (), {}, 1, 0.1)
        ctl.on_events([started])
        passes, settled = keep + 45, keep + 5
        first: dict[str, int] = {}
        for k in range(1, passes + 1):
            at = t0 + k * 8_000_000_000  # Profile Now every 8 s
            starts = np.arange(40, dtype=np.int64) * 100_000_000 + 1_000_000_000
            ctl.on_events(
                [
                    Marker("profile", "profiling", at),
                    LatencyBatch(starts, np.full(40, 4_000_000, np.int64), origin_ns=at),
                    _profile(k),
                ]
            )
            wb.window.latency.paint_now()  # as its paint timer does, shown
            qapp.processEvents()
            if k == settled:
                first = _held(qapp)
        last = _held(qapp)
        grew = {
            kind: last.get(kind, 0) - first.get(kind, 0)
            for kind in ("dict", "list", "tuple", "OpStat", "OpProfile", "[scene items]")
        }
        span = passes - settled
        # one per node a pass would be 106 x 40; what the roofline's symbol atlas or a
        # cache keeps, at most a few in all
        assert grew["OpStat"] <= 0 and grew["OpProfile"] <= 0, grew
        # a band left per pass was 3 items a pass (stop 60: 120 over these 40); a busy
        # machine's late deletions can leave a few in flight at the last count
        assert grew["[scene items]"] < span // 4, grew
        assert grew["dict"] < span and grew["list"] < span and grew["tuple"] < span, grew
    finally:
        wb.shutdown()
