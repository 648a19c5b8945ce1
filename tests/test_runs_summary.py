"""The runs table's model without Qt: figures from raw samples, deltas to a pinned run."""

from __future__ import annotations

import math

import numpy as np
import pytest

from widgets.models.runs_summary import RunsSummary


def _feed(runs: RunsSummary, lat_ms: float, n: int, t0_s: float = 0.0) -> None:
    lat = np.full(n, lat_ms * 1e6)
    starts = (t0_s + np.arange(n) * lat_ms / 1e3) * 1e9  # back to back
    runs.add(starts[: n // 2], lat[: n // 2])
    runs.add(starts[n // 2 :], lat[n // 2 :])


def test_pinning_a_baseline_gives_each_run_its_change() -> None:
    runs = RunsSummary()
    runs.start("FP32 batch=1", "input_ids 1x128", 1)
    _feed(runs, 10.0, 400)
    runs.set_cosine(1.0)
    runs.start("FP32 batch=4", "input_ids 4x128", 4)  # the batch-1 run ends here
    _feed(runs, 20.0, 200, t0_s=10)
    rows = runs.rows()
    assert [r.running for r in rows] == [False, True]
    assert rows[0].p50_ms == pytest.approx(10.0) and rows[1].p50_ms == pytest.approx(20.0)
    assert rows[0].samples_per_s == pytest.approx(100.0)
    assert rows[1].samples_per_s == pytest.approx(200.0)  # 4 per 20 ms: throughput up
    assert math.isnan(rows[1].d_p50)  # no baseline yet
    runs.pin(0)
    rows = runs.rows()
    assert rows[0].baseline and rows[0].d_p50 == 0.0
    assert rows[1].d_p50 == pytest.approx(100.0)  # p50 doubled...
    assert rows[1].d_samples_per_s == pytest.approx(100.0)  # ...and so did samples/s
    runs.pin(1)
    assert runs.rows()[0].d_p50 == pytest.approx(-50.0)
    runs.pin(None)
    assert math.isnan(runs.rows()[0].d_p50)
    with pytest.raises(IndexError):
        runs.pin(5)


def test_the_engines_final_statistics_replace_the_live_ones() -> None:
    runs = RunsSummary()
    runs.start("INT8 dynamic", "image 1x3x64x64", 1)
    _feed(runs, 5.0, 100)
    runs.set_cosine(0.9993)
    runs.finish(count=12_345, p50_ms=4.5, p99_ms=9.0, samples_per_s=210.0)
    runs.end()
    row = runs.rows()[0]
    assert (row.count, row.p50_ms, row.p99_ms, row.samples_per_s) == (12_345, 4.5, 9.0, 210.0)
    assert row.cosine == pytest.approx(0.9993) and not row.running
    runs.add([1.0], [1.0])  # no run open: ignored
    assert runs.rows()[0].count == 12_345
    runs.start("FP32", "image 1x3x64x64", 1)
    assert runs.rows()[1].count == 0 and math.isnan(runs.rows()[1].p50_ms)


def test_a_load_run_gets_its_own_row_with_its_end_to_end_figures(qtbot) -> None:  # type: ignore[no-untyped-def]
    """The app's Runs table: a load run is a row of its own (not an empty timing row), with
    the serving run's end-to-end p50/p99 and requests/s once it is done."""
    from engine.events import RunEnded, ServingStarted, ServingSummary

    ctl = _room(qtbot)
    ctl.summary.start("FP32 batch=1", "image 1x3x64x64", 1)
    _feed(ctl.summary, 1.0, 100)
    traffic = {"kind": "bursts", "spec": "bursts:500,2000,4,0.25"}
    batching = {"max_batch": 8, "delay_ms": 2.0, "instances": 1}
    # the engine host starts the load run as a run (RunStarted), then says it serves load
    ctl.on_events([_started(), ServingStarted(traffic, batching, {"size": 0}, 1.0, False)])
    rows = ctl.summary.rows()
    assert len(rows) == 2 and not rows[0].running and rows[0].p50_ms == pytest.approx(1.0)
    assert rows[1].running and rows[1].label.startswith("load bursts:500,2000,4,0.25")
    assert "max batch 8, delay 2 ms, 1 instance" in rows[1].label
    summary = {"latency_ms": {"count": 8510, "p50": 4.26, "p99": 38.2},
               "throughput": {"requests_per_s": 773.0}}  # fmt: skip
    ctl.on_events([ServingSummary(summary), RunEnded("ok")])
    row = ctl.summary.rows()[1]
    assert (row.count, row.p50_ms, row.p99_ms, row.samples_per_s) == (8510, 4.26, 38.2, 773.0)
    assert not row.running


def _room(qtbot):  # type: ignore[no-untyped-def]
    """The Runs room installed at a spec'd double of the desk: its controller, its table
    the real one."""
    from unittest.mock import MagicMock

    from app import runs
    from app.desk import Desk

    desk = MagicMock(spec=Desk)
    ctl = runs.install(desk)
    (title, table, _place), _ = desk.add_dock.call_args
    assert title == "Runs" and table is ctl.view
    (feed,) = desk.events.connect.call_args.args  # the host's events reach it
    assert feed == ctl.on_events
    qtbot.addWidget(table)
    return ctl


def _started():  # type: ignore[no-untyped-def]
    from engine.config import RunConfig
    from engine.events import RunStarted

    return RunStarted(RunConfig(), "cpu", "CPUExecutionProvider", ("CPUExecutionProvider",),
                      {"image": ((1, 3, 64, 64), "float32")}, 1, 0.1)  # fmt: skip


def test_runs_of_two_models_and_sizes_read_apart_and_numbers_never_in_exponents(qtbot) -> None:  # type: ignore[no-untyped-def]
    """The afternoon's Runs dock: the demo, MiniLM at 128 and at 256 all read 'FP32
    fusion=all batch=1 threads=2'. Each row now names its model and inputs beside the
    config, and 9,630 ms prints as that, not '9.63e+03'."""
    from engine.events import ModelLoaded, RunEnded, ServingStarted, ServingSummary
    from widgets.runs_table import COLUMNS, RunsTable

    class Info:
        def __init__(self, path: str) -> None:
            self.path = path

    ctl = _room(qtbot)
    ctl.on_events([ModelLoaded(Info("/models/demo_transformer.onnx")), _started()])  # type: ignore[arg-type]
    _feed(ctl.summary, 1.0, 50)
    ctl.on_events([ModelLoaded(Info("/m/minilm/model.onnx")), _started()])  # type: ignore[arg-type]
    batching = {"max_batch": 1, "delay_ms": 0.0, "instances": 2}
    ctl.on_events([ServingStarted({"spec": "poisson:120"}, batching, {"size": 0}, 1.0, False)])
    summary = {"latency_ms": {"count": 90, "p50": 8516.2, "p99": 15379.4},
               "throughput": {"requests_per_s": 27.2}}  # fmt: skip
    ctl.on_events([ServingSummary(summary), RunEnded("ok")])
    table = ctl.view
    assert isinstance(table, RunsTable)
    table.show()
    table.refresh()
    t = table.table
    col = {name: i for i, name in enumerate(COLUMNS)}
    assert COLUMNS.index("model") < COLUMNS.index("config") < COLUMNS.index("inputs")
    assert t.item(0, col["model"]).text() == "demo_transformer.onnx"
    assert t.item(1, col["model"]).text() == "model.onnx"  # the load run keeps its model
    assert t.item(0, col["inputs"]).text() == "image 1x3x64x64"
    assert t.item(1, col["run p50 ms"]).text() == "8,516"
    assert t.item(1, col["run p99 ms"]).text() == "15,379"
    assert t.item(1, col["run p50 ms"]).toolTip().startswith("whole run, n=90;")  # which samples
    assert "whole run" in t.horizontalHeaderItem(col["run p99 ms"]).toolTip()
    assert all("e+" not in t.item(r, c).text() for r in range(2) for c in range(len(COLUMNS)))


def test_figure_prints_three_digits_without_exponents() -> None:
    from widgets.numbers import figure

    cases = {9630.4: "9,630", 999.6: "1,000", 96.34: "96.3", 0.9634: "0.963", 0.0: "0"}
    assert {v: figure(v) for v in cases} == cases
    assert figure(float("nan")) == figure(None) == "–"


def _noisy(runs: RunsSummary, lat_ms: float, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    lat = rng.lognormal(0.0, 0.05, n) * lat_ms * 1e6
    runs.add(np.cumsum(lat) - lat[0], lat)


def test_a_delta_is_a_result_only_like_for_like_quiet_and_apart() -> None:
    """Issue 49: noise painted green, a Δ against another model, a busy run's Δ: each now
    says why it is no verdict, and only a separated quiet like-for-like Δ is judged."""
    from engine.api import Contention

    quiet, busy = Contention(2.0, 2, 0.01, 0.0, 1.0), Contention(2.0, 2, 1.8, 0.0, 1.0)
    runs = RunsSummary()
    runs.start("FP32 fusion=off", "x 1x128", 1, "minilm.onnx", "onnxruntime")
    _noisy(runs, 10.0, 400, 1)
    runs.add_load(quiet)
    runs.start("FP32 fusion=all", "x 1x128", 1, "minilm.onnx", "onnxruntime")
    _noisy(runs, 10.05, 400, 2)  # the same speed, within the noise
    runs.add_load(quiet)
    runs.start("INT8", "x 1x128", 1, "minilm.onnx", "onnxruntime")
    _noisy(runs, 6.0, 400, 3)  # truly faster
    runs.add_load(quiet)
    runs.start("INT8", "x 1x128", 1, "minilm.onnx", "onnxruntime")
    _noisy(runs, 6.0, 400, 4)
    runs.add_load(busy)  # measured while other work ran
    runs.start("FP32", "x 1x128", 1, "other.onnx", "onnxruntime")
    _noisy(runs, 0.4, 400, 5)  # another model: -96%
    runs.add_load(quiet)
    runs.start("FP32", "x 1x512", 1, "minilm.onnx", "onnxruntime")
    _noisy(runs, 40.0, 400, 6)
    runs.add_load(quiet)
    runs.pin(0)
    rows = runs.rows()
    assert rows[0].machine == "quiet" and rows[3].machine == "busy 1.8" and rows[3].busy
    assert rows[3].machine_line.startswith("busy: other processes used 1.80 of 2 CPUs")
    assert rows[1].judged == (False, False, False) and "within the noise" in rows[1].why_not
    assert rows[2].judged[0] and rows[2].why_not in ("", rows[2].why_not)
    assert rows[2].p50_ci is not None and rows[2].p50_ci[1] < rows[0].p50_ci[0]  # type: ignore[index]
    assert rows[3].judged == (False, False, False)
    assert "this run was measured busy" in rows[3].why_not
    assert rows[4].judged == (False, False, False) and "other models" in rows[4].why_not
    assert rows[4].d_p50 < -90  # still shown, not coloured
    assert "other inputs (x 1x128 vs x 1x512)" in rows[5].why_not


def test_the_runs_table_repaints_only_while_it_shows(qapp) -> None:  # type: ignore[no-untyped-def]
    from unittest.mock import MagicMock

    from app.desk import Desk
    from app.runs.controller import RunsController
    from app.runs.port import RunsViewPort

    view = MagicMock(spec=RunsViewPort)
    view.isVisible.return_value = False
    ctl = RunsController(MagicMock(spec=Desk), view, RunsSummary())
    ctl.refresh()  # the timer's tick, the dock's tab not shown
    view.refresh.assert_not_called()
    view.set_runs.assert_called_once_with([], [])  # ids even so: a pin names its run
    view.isVisible.return_value = True
    ctl.refresh()
    view.refresh.assert_called_once_with()
