"""The window as an engineer reads it: input sizes set live and marked, the runs table
with a pinned baseline, the header's window per config, data files picked in the window,
banners that go when they no longer apply, a new model on FP32 defaults."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")
from pytestqt.qtbot import QtBot

from app.shell.workbench import Workbench
from engine.events import Progress
from engine.session.store import open_session_file
from tests.conftest import DEMO_CNN, DEMO_TRANSFORMER
from widgets.runs_table import P50_DELTA

TIMEOUT_MS = 90_000


def _bench(qtbot: QtBot, tmp_path: Path, model: Path) -> Workbench:
    wb = Workbench(session_path=str(tmp_path / "live.opscope"), usable=["cpu"])
    qtbot.addWidget(wb.window)
    wb.window.show()
    wb.start(str(model))
    return wb


def _marked(wb: Workbench, label: str) -> bool:
    return any(text == label for _, text in wb.window.latency.markers)


def test_sequence_length_applies_live_and_the_runs_table_compares(
    qtbot: QtBot, tmp_path: Path
) -> None:
    wb = _bench(qtbot, tmp_path, DEMO_TRANSFORMER)
    try:
        w = wb.window
        qtbot.waitUntil(lambda: wb.controller.samples > 20, timeout=TIMEOUT_MS)
        assert "input_ids 1x128, default size" in w.model_label.text()
        box = w.inputs._boxes["sequence"]
        box.setValue(32)  # debounced into one rebuild
        qtbot.waitUntil(lambda: _marked(wb, "sequence 32"), timeout=TIMEOUT_MS)
        qtbot.waitUntil(
            lambda: "input_ids 1x32, size set" in w.model_label.text(), timeout=TIMEOUT_MS
        )
        # the header's window holds only the new size's samples
        n = wb.controller.samples
        qtbot.waitUntil(lambda: wb.controller.samples > n + 20, timeout=TIMEOUT_MS)
        stats = w.latency.latest_stats()
        assert 0 < stats["count"] <= stats["segment"] < w.latency.series.total
        assert np.isfinite(stats["samples_per_s"])

        from app.runs.controller import RunsController

        runs = wb.room(RunsController).summary
        table = wb.window.dock("Runs").widget()
        assert [r.inputs for r in runs.rows()] == ["input_ids 1x128", "input_ids 1x32"]
        wb.recording.flush()  # the session records each run's shapes
        reader = open_session_file(tmp_path / "live.opscope")
        try:
            recorded = [r.inputs["input_ids"] for r in reader.runs()]
        finally:
            reader.close()
        assert [tuple(r["shape"]) for r in recorded] == [(1, 128), (1, 32)]
        table.table.selectRow(0)
        table.pin_button.click()
        # the dock recomputes its figures on a 1 s timer: wait for one after the new samples
        qtbot.waitUntil(lambda: np.isfinite(runs.rows()[1].d_p50), timeout=TIMEOUT_MS)
        rows = runs.rows()
        assert rows[0].baseline and rows[0].d_p50 == 0.0
        assert np.isfinite(rows[1].d_p50) and np.isfinite(rows[1].d_samples_per_s)
        # the table draws the figures on its own refresh, after they are computed
        qtbot.waitUntil(
            lambda: table.table.item(1, P50_DELTA).text().endswith("%"),
            timeout=TIMEOUT_MS,
        )
        cell = table.table.item(1, P50_DELTA).text()
        assert cell.endswith("%") and cell[0] in "+-"
        qtbot.waitUntil(lambda: "Δ against run 1" in table.note.text(), timeout=TIMEOUT_MS)

        # a bad evaluation file: one line in the banner, nothing else changes
        bad = tmp_path / "bad.npz"
        np.savez(bad, pixels=np.zeros(3))
        wb.inputs.set_file("inputs", str(bad))
        assert w.banner.isVisible() and "bad.npz: no arrays for inputs input_ids" in (
            w.banner.text.text()
        )
        assert wb.inputs.evaluation is None

        # the peaks, measured once, are said over the plot until they arrive
        wb.controller.on_events([Progress("peaks", 0, 1, "measuring")])
        assert w.plot_notice.isVisible() and "peaks, once" in w.plot_notice.text()
        wb.controller.on_events([Progress("peaks", 1, 1, "done")])
        assert not w.plot_notice.isVisible()
    finally:
        wb.shutdown()


def test_banners_follow_the_config_and_calibration_is_picked_in_the_window(
    qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wb = _bench(qtbot, tmp_path, DEMO_CNN)
    try:
        w, panel = wb.window, wb.window.config_panel
        qtbot.waitUntil(lambda: wb.controller.samples > 10, timeout=TIMEOUT_MS)
        panel.precision.setCurrentIndex(panel.precision.findData("int8-dynamic"))
        qtbot.waitUntil(
            lambda: any("Conv quantized" in m for m in w.banner.messages()), timeout=TIMEOUT_MS
        )
        # among the banner's messages (the one shown is the newest: under load the INT8
        # race's verdict can land after it)
        assert any("try INT8 static" in m for m in w.banner.messages()), w.banner.messages()
        panel.precision.setCurrentIndex(panel.precision.findData("fp32"))
        qtbot.waitUntil(lambda: _marked(wb, "FP32"), timeout=TIMEOUT_MS)
        assert not any("Conv quantized" in m for m in w.banner.messages()), w.banner.messages()

        cal = tmp_path / "cal.npz"
        rng = np.random.default_rng(0)
        np.savez(cal, image=rng.standard_normal((8, 3, 64, 64)).astype(np.float32))
        monkeypatch.setattr(
            "app.live.input_panel.QFileDialog.getOpenFileName", lambda *a: (str(cal), "")
        )
        w.inputs.calibration.button.click()
        assert w.inputs.calibration.name.text() == "cal.npz"
        variants: list[object] = []
        wb.client.events.connect(
            lambda batch: variants.extend(e for e in batch if type(e).__name__ == "VariantReady")
        )
        panel.precision.setCurrentIndex(panel.precision.findData("int8-static"))
        qtbot.waitUntil(lambda: _marked(wb, "INT8 static"), timeout=TIMEOUT_MS)
        static = [v for v in variants if v.precision == "int8-static"]  # type: ignore[attr-defined]
        assert static and static[-1].details["params"]["calibration"].startswith("npz:")
        assert not any("generated data" in m for m in w.banner.messages()), w.banner.messages()
        # remembered for this model
        assert wb.inputs.for_new_model(str(DEMO_CNN))["calibration"] == str(cal)
    finally:
        wb.shutdown()


def test_a_new_model_starts_on_fp32_defaults_and_says_so(qtbot: QtBot, tmp_path: Path) -> None:
    wb = _bench(qtbot, tmp_path, DEMO_CNN)
    try:
        w, panel = wb.window, wb.window.config_panel
        qtbot.waitUntil(lambda: wb.controller.samples > 10, timeout=TIMEOUT_MS)
        panel.batch.setValue(3)
        qtbot.waitUntil(lambda: _marked(wb, "batch 3"), timeout=TIMEOUT_MS)
        assert not w.inputs.carry.isChecked()  # off by default
        wb.open_model(str(DEMO_TRANSFORMER))
        assert panel.config().batch == 1
        assert any("left behind: batch 3" in m for m in w.banner.messages())
        qtbot.waitUntil(lambda: wb.controller.batch == 1 and "transformer" in
                        w.model_label.text(), timeout=TIMEOUT_MS)  # fmt: skip
        w.inputs.carry.setChecked(True)
        panel.batch.setValue(2)
        qtbot.waitUntil(lambda: _marked(wb, "batch 2"), timeout=TIMEOUT_MS)
        wb.open_model(str(DEMO_CNN))
        assert panel.config().batch == 2
        # among the banner's messages: the one shown is the newest, and the host's own
        # notices (the machine's roofs measured busy) can land meanwhile under load
        assert "Carried over to the new model: batch 2" in w.banner.messages()
    finally:
        wb.shutdown()


def test_the_banner_shows_the_newest_and_clears_by_key(qtbot: QtBot) -> None:
    from app.shell.banner import Banner

    banner = Banner()
    qtbot.addWidget(banner)
    banner.show()
    banner.show_message("warning", "0 of 6 Conv quantized", key="run:int8")
    banner.show_message("error", "apply failed: x", key="error:apply")
    assert banner.text.text() == "apply failed: x" and banner.more.text() == "+1 more"
    banner.show_message("error", "apply failed: y", key="error:apply")  # replaces
    assert len(banner.keys()) == 2
    banner.dismiss()
    assert banner.text.text() == "0 of 6 Conv quantized" and banner.isVisible()
    banner.clear(prefix="run:")
    assert not banner.isVisible() and banner.keys() == []
