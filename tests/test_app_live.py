"""The desktop app, headless and for real: engine host process, live plot, config
changes, bad models, a killed host and its restart."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest

pytest.importorskip("PySide6")
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu
from pytestqt.qtbot import QtBot

from app.host.job_runner import JobRunner
from app.shell.workbench import Workbench
from engine.run import memory_trim
from engine.session.rows import RunRow
from engine.session.store import open_session_file
from tests.conftest import DEMO_CNN

TIMEOUT_MS = 90_000


@pytest.fixture
def bench(qtbot: QtBot, tmp_path: Path):  # type: ignore[no-untyped-def]
    wb = Workbench(session_path=str(tmp_path / "live.opscope"), usable=["cpu"])
    qtbot.addWidget(wb.window)
    wb.window.show()
    wb.start(str(DEMO_CNN))
    yield wb
    wb.shutdown()


def _samples_after(wb: Workbench, n: int) -> bool:
    return wb.controller.samples > n


def test_launch_shows_samples_and_ops(bench: Workbench, qtbot: QtBot) -> None:
    qtbot.waitUntil(lambda: _samples_after(bench, 20), timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: len(bench.window.latency.samples()[0]) > 0, timeout=5_000)
    assert bench.controller.provider == "CPUExecutionProvider"
    assert "demo_cnn" in bench.window.model_label.text()
    qtbot.waitUntil(lambda: bool(bench.window.op_table.model.rows), timeout=TIMEOUT_MS)
    bench.update_status()
    assert "CPU" in bench.window.status_provider.text()
    trimmer = memory_trim._started  # the window gives free memory back every minute
    assert trimmer is not None and trimmer.every_s == memory_trim.WINDOW_EVERY_S


def test_config_change_marks_the_curve(bench: Workbench, qtbot: QtBot) -> None:
    qtbot.waitUntil(lambda: _samples_after(bench, 10), timeout=TIMEOUT_MS)
    panel = bench.window.config_panel
    panel.batch.setValue(4)  # debounced into one apply
    qtbot.waitUntil(
        lambda: any(label == "batch 4" for _, label in bench.window.latency.markers),
        timeout=TIMEOUT_MS,
    )
    t_marker = next(t for t, label in bench.window.latency.markers if label == "batch 4")
    qtbot.waitUntil(
        lambda: bench.window.latency.samples()[0][-1] > t_marker + 0.3, timeout=TIMEOUT_MS
    )
    assert bench.controller.batch == 4


def test_bad_model_shows_error_and_keeps_running(
    bench: Workbench, qtbot: QtBot, zoo: dict[str, Path]
) -> None:
    qtbot.waitUntil(lambda: _samples_after(bench, 10), timeout=TIMEOUT_MS)
    bench.open_model(str(zoo["corrupt"]))
    # its error (shown before any warning, such as a busy machine's provisional roofs)
    qtbot.waitUntil(lambda: "corrupt.onnx" in bench.window.banner.text.text(), timeout=TIMEOUT_MS)
    text = bench.window.banner.text.text()
    assert "corrupt.onnx" in text and "not a valid ONNX file" in text
    assert "keeps running" in text
    n = bench.controller.samples
    qtbot.waitUntil(lambda: _samples_after(bench, n + 10), timeout=TIMEOUT_MS)
    assert "demo_cnn" in bench.window.model_label.text()


def test_killed_host_shows_banner_and_restart_works(
    bench: Workbench, qtbot: QtBot, tmp_path: Path
) -> None:
    qtbot.waitUntil(lambda: _samples_after(bench, 10), timeout=TIMEOUT_MS)
    bench.client.kill_host()
    qtbot.waitUntil(
        lambda: (
            "Restart engine" in bench.window.banner.action.text()
            and bench.window.banner.isVisible()
        ),
        timeout=TIMEOUT_MS,
    )
    assert "SIGKILL" in bench.window.banner.text.text()
    # everything recorded so far is in the session file, the run marked as failed (the
    # banner and the recording each get the death as their own queued call)

    def last_run() -> RunRow:
        bench.recording.flush()
        reader = open_session_file(tmp_path / "live.opscope")
        try:
            run = reader.runs()[-1]
            assert reader.latency(run.id)[1].size > 0
            return run
        finally:
            reader.close()

    qtbot.waitUntil(lambda: last_run().status == "error", timeout=TIMEOUT_MS)
    n = bench.controller.samples
    bench.window.banner.action.click()
    qtbot.waitUntil(lambda: _samples_after(bench, n + 10), timeout=TIMEOUT_MS)
    assert bench.client.alive


def test_open_session_shows_runs_and_compares(qtbot: QtBot, tmp_path: Path) -> None:
    """A teammate's session: runs listed read-only, curves, ops, and a comparison."""
    import subprocess
    import sys

    from app.sessions.session_window import COLUMNS, SessionWindow
    from tests.conftest import ROOT

    path = tmp_path / "shared.opscope"
    for extra in ([], ["--batch", "2"]):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "app.entry",
                "profile",
                str(DEMO_CNN),
                "--duration",
                "0.3",
                "--runs",
                "3",
                "--session",
                str(path),
                *extra,
            ],
            cwd=ROOT,
            check=True,
            capture_output=True,
            timeout=300,
        )
    window = SessionWindow(path, MagicMock(spec=JobRunner))
    qtbot.addWidget(window)
    assert window.table.rowCount() == 2
    config = window.table.item(1, COLUMNS.index("config")).text()
    assert "batch=2" in config
    assert window.ops.model.rows  # the last run's op table
    assert window.latency.samples()[0].size > 0
    window.table.selectAll()
    qtbot.waitUntil(lambda: window.compare.comparison is not None, timeout=30_000)
    assert not window.compare.job.busy  # compared on a worker thread, shown on this one
    assert window.compare.metrics.rowCount() >= 1
    assert window.compare.ops.rowCount() > 0


def test_broken_session_file_is_a_clear_error(tmp_path: Path) -> None:
    from app.sessions.session_window import SessionWindow
    from engine.errors import SessionFileError

    bad = tmp_path / "bad.opscope"
    bad.write_bytes(b"definitely not sqlite")
    with pytest.raises(SessionFileError) as err:
        SessionWindow(bad, MagicMock(spec=JobRunner))
    assert "bad.opscope" in str(err.value) and "\n" not in str(err.value)


def test_save_session_as_keeps_recording_and_exports(
    bench: Workbench, qtbot: QtBot, tmp_path: Path
) -> None:
    from app.sessions.exports import ExportNotice

    qtbot.waitUntil(lambda: bool(bench.window.op_table.model.rows), timeout=TIMEOUT_MS)
    saved = tmp_path / "saved.opscope"
    bench.recording.save_as(saved)
    assert bench.recording.path == saved
    bench.recording.flush()
    reader = open_session_file(saved)
    before = reader.runs()[-1].samples
    reader.close()
    n = bench.controller.samples
    qtbot.waitUntil(lambda: _samples_after(bench, n + 20), timeout=TIMEOUT_MS)
    bench.recording.flush()
    reader = open_session_file(saved)
    assert reader.runs()[-1].samples > before  # still recording, into the new file
    reader.close()
    notice = bench.window.findChild(ExportNotice)  # File > Export's: a job in the host
    for kind, session, out in (("report", saved, "r.html"), ("trace", saved, "t.json"),
                               ("report", tmp_path / "missing.opscope", "x.html")):  # fmt: skip
        notice.start(kind, str(session), str(tmp_path / out))
        qtbot.waitUntil(lambda: not notice.busy, timeout=TIMEOUT_MS)
    assert "<svg" in (tmp_path / "r.html").read_text()
    assert (tmp_path / "t.json").stat().st_size > 100
    assert (
        notice.text.text().startswith("Cannot export report: ") and "missing" in notice.text.text()
    )


def test_a_host_whose_heartbeats_stop_is_reported_as_hung(bench: Workbench, qtbot: QtBot) -> None:
    """The real host beats: no alarm; 31 s without a beat (SIGSTOP, a native call holding
    the GIL) and the banner says so and offers a restart."""
    qtbot.waitUntil(lambda: _samples_after(bench, 10), timeout=TIMEOUT_MS)
    c = bench.controller
    assert not c.check_hang()
    assert c.last_beat is not None
    assert c.check_hang(now=c.last_beat + 31)
    assert bench.window.banner.isVisible()
    assert "no heartbeat from the engine host for 31 s" in bench.window.banner.text.text()
    assert bench.window.banner.action.text() == "Restart engine"


def test_a_build_that_pauses_timing_is_not_a_hang(bench: Workbench, qtbot: QtBot) -> None:
    """While the next config builds, timing waits and a build step may be quiet for long:
    the pause is shaded on the plot; the host keeps beating, so it is never a hang."""
    import time

    from engine.events import Marker

    qtbot.waitUntil(lambda: _samples_after(bench, 10), timeout=TIMEOUT_MS)
    c = bench.controller
    c.on_events([Marker("pause", "preparing INT8 static", time.perf_counter_ns())])
    assert any(
        label == "preparing INT8 static" for _, _, label in bench.window.latency.pauses.bands()
    )
    heard = c.last_beat
    assert heard is not None
    qtbot.waitUntil(lambda: (c.last_beat or 0.0) > heard + 1.0, timeout=TIMEOUT_MS)
    assert not c.check_hang()


def test_bad_first_model_does_not_claim_a_previous_one(
    qtbot: QtBot, tmp_path: Path, zoo: dict[str, Path]
) -> None:
    wb = Workbench(session_path=str(tmp_path / "first.opscope"), usable=["cpu"])
    qtbot.addWidget(wb.window)
    wb.window.show()
    wb.start(str(zoo["corrupt"]))
    try:
        qtbot.waitUntil(
            lambda: "not a valid ONNX file" in wb.window.banner.text.text(), timeout=TIMEOUT_MS
        )
        text = wb.window.banner.text.text()
        assert "not a valid ONNX file" in text
        assert "keeps running" not in text and "Open Model" in text
    finally:
        wb.shutdown()


def test_pytorch_file_runs_on_both_engines_in_the_window(
    bench: Workbench, qtbot: QtBot, tmp_path: Path
) -> None:
    """A .pt2 opened in the window: the engine selector offers PyTorch, a switch is a marked
    run on the same curve, and opening an ONNX model again goes back to ONNX Runtime."""
    torch = pytest.importorskip("torch")
    from tests.torch_models import mlp, save_pt2

    pt2 = save_pt2(mlp(), torch.randn(2, 16), tmp_path / "mlp.pt2")
    panel = bench.window.config_panel
    qtbot.waitUntil(lambda: _samples_after(bench, 10), timeout=TIMEOUT_MS)
    torch_item = panel.engine.model().item(panel.engine.findData("torch"))
    assert not torch_item.isEnabled()  # an ONNX model is loaded
    bench.open_model(str(pt2))  # ONNX Runtime first: exported to ONNX
    qtbot.waitUntil(lambda: "mlp" in bench.window.model_label.text(), timeout=TIMEOUT_MS)
    assert torch_item.isEnabled()
    panel.engine.setCurrentIndex(panel.engine.findData("torch"))
    assert panel.config().fusion == "all"  # ONNX Runtime's fusion level -> torch.compile
    panel.fusion.setCurrentIndex(panel.fusion.findData("off"))  # eager: no compile wait
    qtbot.waitUntil(lambda: bench.controller.provider == "torch-cpu", timeout=TIMEOUT_MS)
    qtbot.waitUntil(
        lambda: any(label.startswith("PyTorch eager") for _, label in bench.window.latency.markers),
        timeout=TIMEOUT_MS,
    )
    n = bench.controller.samples
    qtbot.waitUntil(lambda: _samples_after(bench, n + 10), timeout=TIMEOUT_MS)
    bench.open_model(str(DEMO_CNN))  # ONNX on the PyTorch engine: back to ONNX Runtime
    assert panel.config().engine == "onnxruntime"
    qtbot.waitUntil(
        lambda: (
            bench.controller.provider == "CPUExecutionProvider"
            and "demo_cnn" in bench.window.model_label.text()
        ),
        timeout=TIMEOUT_MS,
    )
    assert not torch_item.isEnabled()


def test_scroll_in_steps_is_a_remembered_view_choice(qtbot: QtBot, tmp_path: Path) -> None:
    """View > Scroll in Steps (on by default) switches the followed plot between steps and
    scrolling with every frame, and a new window remembers it. No engine is started."""

    def step_action(wb: Workbench) -> QAction:
        view = next(m for m in wb.window.menuBar().findChildren(QMenu) if m.title() == "&View")
        return next(a for a in view.actions() if a.text() == "Scroll in &Steps")

    first = Workbench(session_path=str(tmp_path / "a.opscope"), usable=["cpu"])
    qtbot.addWidget(first.window)
    action = step_action(first)
    assert action.isChecked() and first.window.latency.stepped_follow
    action.trigger()
    assert not first.window.latency.stepped_follow
    first.shutdown()
    second = Workbench(session_path=str(tmp_path / "b.opscope"), usable=["cpu"])
    qtbot.addWidget(second.window)
    assert not second.window.latency.stepped_follow and not step_action(second).isChecked()
    step_action(second).trigger()  # back to the default for the other tests
    assert second.window.latency.stepped_follow
    second.shutdown()


def test_traffic_dock_runs_load_with_slo_and_what_if(bench: Workbench, qtbot: QtBot) -> None:
    """Run load from the Traffic dock: the serving curves fill, the end-to-end latencies
    land on the latency plot after a load marker, an SLO below them leaves a marker and a
    warning; the run is a load run in the session, and live timing resumes. Calibrate:
    the What-if view draws the current and proposed capacity curves and moves with the
    sliders."""
    from app.traffic.controller import TrafficController

    qtbot.waitUntil(lambda: _samples_after(bench, 10), timeout=TIMEOUT_MS)
    traffic = bench.room(TrafficController)
    dock = traffic.view
    dock.rate.setValue(150)
    dock.duration.setValue(3)
    dock.max_batch.setValue(4)
    dock.delay.setValue(1.0)
    dock.slo.setValue(0.1)  # far below any latency: the crossing must be flagged
    qtbot.wait(300)  # the idle per-inference timing loop is not what the SLO is about
    assert bench.window.latency.slo_ms is None
    assert not any(label.startswith("p99 > SLO") for _, label in bench.window.latency.markers)
    dock.run_button.click()
    qtbot.waitUntil(lambda: not dock.run_button.isEnabled(), timeout=5_000)
    qtbot.waitUntil(lambda: dock.serving_plot.data()["t"].size >= 3, timeout=TIMEOUT_MS)
    assert bench.window.latency.slo_ms == 0.1  # drawn for the load run
    qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=TIMEOUT_MS)  # ended
    assert "done: p50" in dock.serving_plot.tally.text()
    assert bench.window.latency.slo_ms is None  # and gone with it
    # not silent: the real run is on the What-if, which asks for a calibration to compare
    assert "REAL run at poisson:150" in dock.what_if.check.text()
    assert "Calibrate the What-if" in dock.what_if.check.text()
    labels = [label for _, label in bench.window.latency.markers]
    assert any(label.startswith("load poisson:150") for label in labels)
    assert any(label.startswith("p99 > SLO") for label in labels)
    n = bench.controller.samples
    qtbot.waitUntil(lambda: _samples_after(bench, n + 10), timeout=TIMEOUT_MS)  # resumed
    bench.recording.flush()
    with open_session_file(bench.recording.path) as reader:
        kinds = [r.kind for r in reader.runs()]
        load = next(r for r in reader.runs() if r.kind == "load")
        serving = reader.serving(load.id)
    assert kinds.count("load") == 1 and kinds[-1] == "live"
    assert serving is not None and serving.batching["max_batch"] == 4
    assert serving.summary and serving.summary["requests"]["sent"] == len(serving.records)

    dock.slo.setValue(50)
    dock.calibrate_button.click()
    assert dock.cancel_button.isVisibleTo(dock)  # Cancel while it calibrates
    what_if = dock.what_if
    qtbot.waitUntil(lambda: what_if.curves()["proposed"][0].size > 3, timeout=TIMEOUT_MS)
    assert what_if.curves()["current"][0].size > 3  # the batching of the load run
    assert dock.calibrate_button.text() == "Recalibrate What-if"  # measures again if asked
    qtbot.waitUntil(lambda: "SIMULATED" in what_if.text.text(), timeout=TIMEOUT_MS)
    # its progress said the time left (or, at the end, how long it took)
    shown = dock.progress.format()
    assert "s left" in shown or "calibrated in" in shown or "second left" in shown, shown
    # how busy the machine was while it was calibrated, in words; no Cancel once it ended
    said = what_if.text.text() + what_if.flags.text()
    assert "calibrated quiet" in said or "calibrated busy" in said
    assert not dock.cancel_button.isVisibleTo(dock)
    # the real run held against the prediction of its own traffic and batching
    qtbot.waitUntil(lambda: "predicted p50" in what_if.check.text(), timeout=TIMEOUT_MS)
    rc = traffic.last_check
    assert rc is not None and rc.traffic == "poisson:150" and rc.real_p99 > 0
    assert math.isfinite(rc.speed_ratio) and rc.speed_ratio > 0  # its batches were timed
    assert ("agree" in what_if.check.text()) == rc.agrees
    low_load_p99 = what_if.curves()["proposed"][1][0]
    dock.max_batch.setValue(16)  # a long queue delay: light load now waits for it
    dock.delay.setValue(50)
    qtbot.waitUntil(
        # every light-load request now waits out most of the 50 ms delay (on a machine
        # so loaded that stalls make p99 hundreds of ms, the shift still shows)
        lambda: what_if.curves()["proposed"][1][0] > max(40.0, low_load_p99 + 25.0),
        timeout=TIMEOUT_MS,
    )
    assert what_if.curves()["current"][1][0] == pytest.approx(low_load_p99, rel=0.5)
    dock.stretches.setChecked(True)  # drawn from the calibrated slow-stretch process, said
    qtbot.waitUntil(
        lambda: (
            "slow stretches as calibrated" in what_if.text.text()
            or "no slow stretch in the calibration" in what_if.text.text()
        ),
        timeout=TIMEOUT_MS,
    )
    dock.stretches.setChecked(False)

    # Stop Load (the menu's Ctrl+Shift+L) is the load job's Cancel: sending stops, what
    # was sent is served, and the run is kept, cancelled; the dock is free again
    dock.duration.setValue(60)
    dock.run_button.click()
    qtbot.waitUntil(lambda: traffic.serving, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: dock.serving_plot.data()["t"].size >= 2, timeout=TIMEOUT_MS)
    stop = next(a for a in bench.window.findChildren(QAction) if a.text() == "S&top Load")
    assert stop.shortcut().toString() == "Ctrl+Shift+L"
    stop.trigger()
    qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=20_000)
    assert not bench.jobs.busy("load")
    bench.recording.flush()
    with open_session_file(bench.recording.path) as reader:
        loads = [r for r in reader.runs() if r.kind == "load"]
        stopped = reader.serving(loads[-1].id)
    assert [r.status for r in loads] == ["ok", "cancelled"]
    assert stopped is not None and stopped.summary and len(stopped.records) > 0


def test_int8_in_the_window_meets_the_min_cosine(
    bench: Workbench, qtbot: QtBot, tmp_path: Path
) -> None:
    """INT8 dynamic on a model built to be sensitive: the badge says a node was kept in
    FP32 to meet the window's Min cosine, and the op table marks it; a lower Min cosine
    rebuilds INT8 without it."""
    from tests.test_int8_target import build_quant_sensitive

    model = build_quant_sensitive(tmp_path)
    w = bench.window
    w.tolerance.setValue(0.99)
    qtbot.waitUntil(lambda: _samples_after(bench, 5), timeout=TIMEOUT_MS)
    bench.open_model(str(model))
    qtbot.waitUntil(lambda: "quant_sensitive" in w.model_label.text(), timeout=TIMEOUT_MS)
    w.config_panel.precision.setCurrentIndex(w.config_panel.precision.findData("int8-dynamic"))
    qtbot.waitUntil(
        lambda: "1 node kept in FP32 to meet 0.99" in w.accuracy.text(),
        timeout=TIMEOUT_MS,
    )
    assert w.accuracy.state == "good"
    qtbot.waitUntil(lambda: bool(w.op_table.model.rows), timeout=TIMEOUT_MS)
    assert w.op_table.model.kept_fp32("mm_sensitive")
    w.tolerance.setValue(0.9)  # the default INT8 (cosine ~0.72) still misses 0.9
    qtbot.waitUntil(
        lambda: any("min cosine 0.9" in label for _, label in w.latency.markers),
        timeout=TIMEOUT_MS,
    )


def two_trials(dock: Any) -> None:
    """The Tune dock set for a small tune: FP32 and INT8 dynamic, fusion all, 0.5 s each."""
    for p, box in dock.precisions.items():
        box.setChecked(p in ("fp32", "int8-dynamic"))
    for f, box in dock.fusions.items():
        box.setChecked(f == "all")
    dock.threads.setText("1")
    dock.duration.setValue(0.5)


def test_tune_dock_runs_trials_and_applies_one(bench: Workbench, qtbot: QtBot) -> None:
    """Start a small tune from the Tune dock: live timing pauses, the trials fill the table
    and the scatter (front and best), the summary gives the command; double-clicking a
    trial applies its config live and timing resumes."""
    from app.tune.controller import TuneController

    qtbot.waitUntil(lambda: _samples_after(bench, 5), timeout=TIMEOUT_MS)
    dock = bench.room(TuneController).view
    two_trials(dock)
    dock.start_button.click()
    qtbot.waitUntil(lambda: not bench.running, timeout=5_000)  # timing paused
    qtbot.waitUntil(lambda: dock.table.rowCount() == 2, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: dock.start_button.isEnabled(), timeout=TIMEOUT_MS)
    assert "best: trial" in dock.summary.text() and "opscope bench" in dock.summary.text()
    assert len(dock.plot.data["trials"]) == 2 and dock.plot.data["best"] in (1, 2)
    qtbot.waitUntil(lambda: bench.running, timeout=5_000)  # resumed
    int8_row = next(r for r in range(2) if "INT8" in dock.table.item(r, 1).text())
    dock.table.cellDoubleClicked.emit(int8_row, 1)
    qtbot.waitUntil(
        lambda: bench.window.config_panel.config().precision == "int8-dynamic", timeout=5_000
    )
    bench.recording.flush()
    with open_session_file(bench.recording.path) as reader:
        assert sum(r.kind == "bench" for r in reader.runs()) == 2  # the trials, recorded
    # the Runs dock lists them too, each with the file's id and kind (issue 53: it skipped
    # the runs a tune's trial processes recorded, and its ids jumped)
    from tests.test_app_runs_kinds import dock_rows, file_rows

    path = Path(bench.recording.path)
    qtbot.waitUntil(lambda: dock_rows(bench) == file_rows(path), timeout=30_000)


def test_scaling_dock_sweeps_the_loaded_model(qtbot: QtBot, tmp_path: Path) -> None:
    """A sweep from the Scaling dock runs as a job in the engine host, draws one line per op
    type and the total on log-log axes, and records its points and itself in the session."""
    from tests.conftest import DEMO_TRANSFORMER

    wb = Workbench(session_path=str(tmp_path / "s.opscope"), usable=["cpu"])
    qtbot.addWidget(wb.window)
    wb.window.show()
    wb.start(str(DEMO_TRANSFORMER))
    try:
        qtbot.waitUntil(lambda: wb.controller.samples > 5, timeout=TIMEOUT_MS)
        from app.scaling.controller import ScalingController

        dock = wb.room(ScalingController).view
        assert dock.dim.currentText() == "sequence"  # the model's own dims, batch last
        dock.values.setText("16,32,64")
        dock.run_button.click()
        qtbot.waitUntil(lambda: not wb.running, timeout=5_000)
        qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=TIMEOUT_MS)
        assert "total ~ sequence^" in dock.status.text(), dock.status.text()
        assert "total" in dock.plot.lines and len(dock.plot.lines) >= 3
        qtbot.waitUntil(lambda: wb.running, timeout=5_000)
        wb.recording.flush()
        with open_session_file(wb.recording.path) as reader:
            assert sum(r.kind == "profile" for r in reader.runs()) == 3
            (sweep,) = reader.sweeps()  # the sweep as a whole, with its points' runs
            assert sweep.values == [16, 32, 64] and len(sweep.run_ids) == 3
        # Cancel mid-sweep: the sweep stops as on Ctrl+C and keeps the points done
        dock.values.setText("16,32,48,64,96,128")
        dock.run_button.click()
        qtbot.waitUntil(lambda: dock.status.text().startswith("point"), timeout=TIMEOUT_MS)
        dock.cancel_button.click()
        qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=TIMEOUT_MS)
        assert dock.status.text() == "sweep cancelled: the points done are in the session"
        qtbot.waitUntil(lambda: wb.running, timeout=5_000)
        wb.recording.flush()
        with open_session_file(wb.recording.path) as reader:
            partial = reader.sweeps()[-1]
            assert partial.status == "partial" and 1 <= len(partial.values) < 6
    finally:
        wb.shutdown()
