"""The session window's Compare tab: the two latest like-for-like runs by default, every
metric and the accuracy in view, no stale numbers when the pair changes."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.sessions.compare_panel import ComparePanel
from engine.session.store import open_session_file
from tests.session_material import record_demo_profile


def test_defaults_to_the_two_latest_and_clears_stale_results(qtbot: QtBot, tmp_path: Path) -> None:
    path = tmp_path / "three.opscope"
    for _ in range(3):
        record_demo_profile(path)
    reader = open_session_file(path)
    runs = reader.runs()
    panel = ComparePanel(reader, runs)
    qtbot.addWidget(panel)
    panel.resize(900, 600)
    panel.show()
    assert (panel.baseline.currentData(), panel.candidate.currentData()) == (
        runs[1].id,
        runs[2].id,
    )
    qtbot.waitUntil(lambda: panel.comparison is not None, timeout=60_000)
    items = [panel.metrics.item(r, 0) for r in range(panel.metrics.rowCount())]
    names = [i.text() for i in items if i is not None]
    assert any(n.startswith("throughput") for n in names)
    assert "cosine vs FP32" in names or "accuracy" in names  # the accuracy row is there
    # every row in view: no vertical scrolling needed
    assert panel.metrics.verticalScrollBar().maximum() == 0
    assert panel.ops.rowCount() > 0
    panel.candidate.setCurrentIndex(panel.candidate.findData(runs[1].id))  # the same run
    assert panel.comparison is None and panel.metrics.rowCount() == 0
    assert panel.ops.rowCount() == 0 and panel.summary.text() == "Pick two different runs."
    panel.candidate.setCurrentIndex(panel.candidate.findData(runs[2].id))
    assert panel.metrics.rowCount() == 0  # cleared while the new pair is compared
    qtbot.waitUntil(lambda: panel.comparison is not None, timeout=60_000)
    comp = panel.comparison
    assert comp is not None and comp.candidate.id == runs[2].id
    reader.close()


def test_accuracy_rows_say_what_each_run_measured() -> None:
    from widgets.models.compare_rows import accuracy_rows

    acc = {
        "baseline": {"cosine": 1.0, "max_abs_err": 0.0},
        "candidate": {"cosine": 0.9978, "max_abs_err": 0.0123},
        "cosine": -0.0022,
        "max_abs_err": 0.0123,
        "top1_agreement": None,
    }
    assert accuracy_rows(acc) == [
        ("cosine vs FP32", "1.00000", "0.99780", "-0.00220"),
        ("max abs err vs FP32", "0", "0.0123", "+0.0123"),
    ]
    assert accuracy_rows({"baseline": None, "candidate": None}) == [
        ("accuracy", "not measured", "not measured", "–")
    ]


def test_a_busy_or_unlike_pair_is_no_verdict_and_stays_uncoloured(
    qtbot: QtBot, tmp_path: Path
) -> None:
    """Issue 49: the window's Compare said "changed nothing" of 128 vs 512 and painted
    +798% worse; now it names the inputs, says why there is no verdict, colours nothing."""
    from tests.test_busy_verdicts import BUSY, QUIET, record

    path = tmp_path / "pair.opscope"
    record(path, 10.0, QUIET, seed=1)
    record(path, 14.0, BUSY, seed=2)  # slower, and measured busy
    record(path, 40.0, QUIET, batch=4, seed=3)  # other shapes
    reader = open_session_file(path)
    runs = reader.runs()
    panel = ComparePanel(reader, runs)
    qtbot.addWidget(panel)
    panel.set_pair(runs[0].id, runs[1].id)
    qtbot.waitUntil(lambda: panel.comparison is not None, timeout=60_000)
    text = panel.summary.text()
    assert text.startswith("No verdict: the candidate was measured busy (other processes used")
    deltas = [panel.metrics.item(r, 3) for r in range(panel.metrics.rowCount())]
    coloured = [d.foreground().color().name() for d in deltas if d is not None]
    assert all(c == coloured[0] for c in coloured)  # one default colour: nothing painted
    panel.set_pair(runs[0].id, runs[2].id)
    qtbot.waitUntil(lambda: panel.comparison is not None, timeout=60_000)
    text = panel.summary.text()
    assert text.startswith("No verdict: not like for like (other inputs (image 1x3x64x64 vs")
    assert "inputs image 1x3x64x64 → image 4x3x64x64" in text
    reader.close()


def _profile(path: Path, model: Path) -> None:
    """A real profile run of `model`, recorded to `path`."""
    from engine.model.workload import Workload
    from engine.run.bench import BenchRequest, run_bench
    from engine.session import Recorder, SessionStore
    from tests.session_material import SHORT

    req = BenchRequest(Workload(str(model)), timing=SHORT, profile=True, profile_runs=3)
    with SessionStore.create_or_open(path) as store:
        rec = Recorder(store, model_path=str(model), kind="profile", config=req.workload.config)
        for ev in run_bench(req):
            rec.feed(ev)
        rec.close()


def test_the_default_pair_is_like_for_like_and_every_picker_names_model_inputs_and_kind(
    qtbot: QtBot, tmp_path: Path
) -> None:
    """Issue 53: Compare opened on the first run (demo CNN) against the latest (another
    model), and its pickers read 'run N: FP32 fusion=all batch=1 threads=2' for all. Now the
    two latest runs of one model and inputs, and each entry names its kind, model, inputs."""
    from engine.cli.compare_cmds import describe_run
    from tests.conftest import DEMO_CNN, DEMO_TRANSFORMER

    path = tmp_path / "two-models.opscope"
    for model in (DEMO_CNN, DEMO_CNN, DEMO_TRANSFORMER):
        _profile(path, model)
    with open_session_file(path) as reader:
        runs = reader.runs()
        panel = ComparePanel(reader, runs)
        qtbot.addWidget(panel)
        assert (panel.baseline.currentData(), panel.candidate.currentData()) == (1, 2)
        labels = [panel.candidate.itemText(i) for i in range(panel.candidate.count())]
        assert labels[0].startswith("run 1 · profile · demo_cnn.onnx · image 1x3x")
        assert labels[2].startswith("run 3 · profile · demo_transformer.onnx · input_ids ")
        assert all(" FP32 " in f" {label} " for label in labels)
        assert describe_run(runs[2]).startswith("profile · demo_transformer.onnx · input_ids ")
        qtbot.waitUntil(lambda: panel.comparison is not None, timeout=60_000)

        alone = ComparePanel(reader, [runs[0], runs[2]])  # no two runs alike: it says so
        qtbot.addWidget(alone)
        assert alone.comparison is None
        assert alone.summary.text().startswith("Pick two runs: no two of the 2 runs are like")


def test_a_long_op_name_takes_at_most_a_third_of_the_ops_table(
    qtbot: QtBot, tmp_path: Path
) -> None:
    """Compare's op-type column took 70% of the width: each name column is capped, its
    text elided in the middle and whole on hover; the figures keep their width."""
    from engine.api import OpDiff

    path = tmp_path / "one.opscope"
    record_demo_profile(path)
    with open_session_file(path) as reader:
        panel = ComparePanel(reader, reader.runs())
        qtbot.addWidget(panel)
        panel.resize(1000, 600)
        panel.show()
        long_type = " -> ".join(["DynamicQuantizeMatMul", "MatMulIntegerToFloat"] * 6)
        name = "/encoder/layer.0/attention/self/query/MatMul_quant_" + "x" * 80
        panel._fill_ops([OpDiff(name, long_type, "both", 1.0, 0.5, 0.2, 0.1, 10, 12)])
        width = panel.ops.viewport().width()
        assert 0 < panel.ops.columnWidth(0) <= 0.31 * width
        assert 0 < panel.ops.columnWidth(1) <= 0.31 * width
        kind, ms = panel.ops.item(0, 1), panel.ops.item(0, 3)
        assert kind is not None and ms is not None
        assert kind.toolTip() == long_type
        assert panel.ops.columnWidth(3) >= panel.ops.fontMetrics().horizontalAdvance(ms.text())
