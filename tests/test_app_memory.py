"""The Memory dock: the memory job run through the window's one runner on the model and
config shown, live timing paused and resumed, the report drawn; and its Qt-free wording."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("PySide6")
from pytestqt.qtbot import QtBot

from app.memory.controller import MemoryController
from app.shell.workbench import Workbench
from engine.session.store import open_session_file
from tests.conftest import DEMO_CNN
from tests.sample_reports import MEMORY_REPORT
from widgets.models.memory_summary import alive_rows, summary_lines, timeline

TIMEOUT_MS = 120_000
REPORT = MEMORY_REPORT


def test_the_report_in_words_and_series() -> None:
    lines = summary_lines(REPORT)
    assert lines[0] == "Weights 324.0 KB (int8 316.0 KB, float32 8.0 KB); the model file's 1.3 MB"
    assert lines[1] == "Activation peak as run: 258.0 KB at conv_2"
    assert (
        lines[2] == "Activation peak as loaded: 1.1 MB or more at bn (2 tensors not sized at "
        "these shapes, not counted)"
    )
    assert lines[3].startswith("The session holds 16.0 MB") and lines[3].endswith("4% of it")
    assert lines[4] == (
        "Load: read 20 ms, variant 4.20 s, session 30 ms (model loading 2 ms + session "
        "initialization 21 ms)"
    )
    x, y, names = timeline(REPORT["activations"]["as_run"])  # type: ignore[arg-type]
    assert (
        list(x) == [0.0, 1.0]
        and list(y) == [100_000.0, 258_000.0]
        and names == ["conv_1", "conv_2"]
    )
    assert alive_rows(REPORT["activations"]["as_run"]) == [("t", "200.0 KB", "conv_1")]  # type: ignore[arg-type]
    assert timeline(None)[0].size == 0 and alive_rows(None) == []


def test_the_memory_dock_measures_the_model_shown(qtbot: QtBot, tmp_path: Path) -> None:
    wb = Workbench(session_path=str(tmp_path / "m.opscope"), usable=["cpu"])
    qtbot.addWidget(wb.window)
    wb.window.show()
    wb.start(str(DEMO_CNN))
    dock = wb.room(MemoryController).view
    try:
        qtbot.waitUntil(lambda: wb.controller.samples > 20, timeout=TIMEOUT_MS)
        assert "demo_cnn" in dock.status.text()
        dock.measure_button.click()
        qtbot.waitUntil(lambda: not wb.running, timeout=5_000)  # the probe gets the cores
        assert dock.status.text().startswith("measuring")
        qtbot.waitUntil(lambda: dock.measure_button.isEnabled(), timeout=TIMEOUT_MS)
        assert dock.status.text().startswith("measured on CPUExecutionProvider"), dock.status.text()
        text = dock.view.summary.text()
        assert text.startswith("Weights 1.3 MB (float32") and "Activation peak as run" in text
        x, y = dock.view.run_curve.getData()
        assert x is not None and len(x) > 5 and float(y.max()) > 0
        assert dock.view.alive.rowCount() > 0 and len(dock.view.peak.points()) == 1
        qtbot.waitUntil(lambda: wb.running, timeout=5_000)  # resumed
        wb.recording.flush()
        with open_session_file(wb.recording.path) as reader:  # recorded in the window's file
            (row,) = reader.memory()
        assert row.model_path == str(DEMO_CNN) and row.report["weights_bytes"]["total"] > 1e6
        dock.measure_button.click()  # again, and cancelled: timing resumes, nothing drawn lost
        qtbot.waitUntil(lambda: dock.cancel_button.isEnabled(), timeout=5_000)
        dock.cancel_button.click()
        qtbot.waitUntil(lambda: dock.measure_button.isEnabled(), timeout=TIMEOUT_MS)
        said = dock.status.text()  # a cancel that lands after the end finds it done
        assert said == "memory cancelled" or said.startswith("measured on"), said
        assert dock.view.summary.text().startswith("Weights")  # the last report stays
        qtbot.waitUntil(lambda: wb.running, timeout=5_000)
    finally:
        wb.shutdown()


def test_the_dock_names_the_shapes_measured_for_and_marks_a_stale_report(qtbot: QtBot) -> None:
    from app.memory.view import STALE_STYLE, MemoryPanel

    panel = MemoryPanel()
    qtbot.addWidget(panel)
    shapes = {"input_ids": [1, 512], "attention_mask": [1, 512]}
    report = {**REPORT, "inputs": shapes, "config": {"precision": "int8-static", "batch": 1}}
    panel.set_report(report)
    assert panel.header.text() == "For input_ids 1x512, attention_mask 1x512 · int8-static, batch 1"
    assert not panel.stale and panel.view.isEnabled()
    panel.set_stale("stale: measured for sequence 512 -> 128; Measure again")
    assert panel.header.text().endswith("\nstale: measured for sequence 512 -> 128; Measure again")
    assert panel.stale and panel.header.styleSheet() == STALE_STYLE and not panel.view.isEnabled()
    panel.set_report(report)  # measured again: fresh
    assert "stale" not in panel.header.text() and panel.view.isEnabled()
    panel.set_report(None)
    panel.set_stale("stale: x")  # nothing drawn: nothing to mark
    assert not panel.stale and panel.header.isHidden()


def test_a_peak_with_unsized_tensors_reads_as_a_floor_not_a_total(qtbot: QtBot) -> None:
    """'2.4 MB (197 tensors of unknown size left out)' read as a wrong total: the peak is a
    floor where some tensors were not sized, in the dock and under the graph alike."""
    from widgets.memory_strip import MemoryStrip
    from widgets.models.memory_summary import peak_text

    live = {"peak_bytes": 2.4e6, "at_node": "Add", "unknown_tensors": 197,
            "timeline": [{"node": "Add", "bytes": 2.4e6}]}  # fmt: skip
    assert peak_text(live, "Add") == (
        "2.4 MB or more at Add (197 tensors not sized at these shapes, not counted)"
    )
    assert peak_text({**live, "unknown_tensors": 0}) == "2.4 MB"
    strip = MemoryStrip()
    qtbot.addWidget(strip)
    strip.set_memory(live)
    assert strip.summary == f"activations: peak {peak_text(live, 'Add')}"
