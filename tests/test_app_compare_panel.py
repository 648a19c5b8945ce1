"""The session window's Compare tab: first run against the latest by default, every
metric and the accuracy in view, no stale numbers when the pair changes."""

from __future__ import annotations

from pathlib import Path

from pytestqt.qtbot import QtBot

from app.sessions.compare_panel import ComparePanel
from engine.session.store import open_session_file
from tests.session_material import record_demo_profile


def test_defaults_to_first_against_latest_and_clears_stale_results(
    qtbot: QtBot, tmp_path: Path
) -> None:
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
        runs[0].id,
        runs[-1].id,
    )
    qtbot.waitUntil(lambda: panel.comparison is not None, timeout=60_000)
    names = [panel.metrics.item(r, 0).text() for r in range(panel.metrics.rowCount())]
    assert any(n.startswith("throughput") for n in names)
    assert "cosine vs FP32" in names or "accuracy" in names  # the accuracy row is there
    # every row in view: no vertical scrolling needed
    assert panel.metrics.verticalScrollBar().maximum() == 0
    assert panel.ops.rowCount() > 0
    panel.candidate.setCurrentIndex(panel.candidate.findData(runs[0].id))  # the same run
    assert panel.comparison is None and panel.metrics.rowCount() == 0
    assert panel.ops.rowCount() == 0 and panel.summary.text() == "Pick two different runs."
    panel.candidate.setCurrentIndex(panel.candidate.findData(runs[1].id))
    assert panel.metrics.rowCount() == 0  # cleared while the new pair is compared
    qtbot.waitUntil(lambda: panel.comparison is not None, timeout=60_000)
    assert panel.comparison.candidate.id == runs[1].id
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
    coloured = [
        panel.metrics.item(r, 3).foreground().color().name()
        for r in range(panel.metrics.rowCount())
        if panel.metrics.item(r, 3) is not None
    ]
    assert all(c == coloured[0] for c in coloured)  # one default colour: nothing painted
    panel.set_pair(runs[0].id, runs[2].id)
    qtbot.waitUntil(lambda: panel.comparison is not None, timeout=60_000)
    text = panel.summary.text()
    assert text.startswith("No verdict: not like for like (other inputs (image 1x3x64x64 vs")
    assert "inputs image 1x3x64x64 → image 4x3x64x64" in text
    reader.close()
