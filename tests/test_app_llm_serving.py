"""The LLM Serving dock on the demo LLM: shown when the generating model opens, the three
layouts simulated side by side (calibration in a child process, live timing paused), one
layout served for real beside its simulated twin, bad values refused in one line, and
Cancel killing a calibration and a real run."""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path

import psutil
import pytest

pytest.importorskip("PySide6")
from PySide6.QtWidgets import QTableWidget
from pytestqt.qtbot import QtBot

from app.llm_serving.controller import LLMServingController
from app.sessions.session_window import SessionWindow
from app.shell.workbench import Workbench
from engine.events import ModelLoaded
from engine.model.info import ModelInfo
from engine.session import open_session_file
from tests.conftest import ROOT

TIMEOUT_MS = 120_000
DEMO_LLM = ROOT / "resources" / "models" / "demo_llm"


def _small(dock, requests: int = 8, rate: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    dock.requests.setValue(requests)
    dock.rate.setValue(rate)
    dock.prompt_len.setText("16-48")
    dock.new_tokens.setText("6")
    dock.max_seqs.setValue(8)


def test_the_dock_simulates_three_layouts_then_serves_one_for_real(
    qtbot: QtBot, tmp_path: Path
) -> None:
    wb = Workbench(session_path=str(tmp_path / "llm.opscope"), usable=["cpu"])
    qtbot.addWidget(wb.window)
    wb.window.show()
    wb.start(str(DEMO_LLM))
    c, frame = wb.room(LLMServingController), wb.window.dock("LLM Serving")
    dock = c.view
    try:
        qtbot.waitUntil(lambda: c.model is not None and frame.isVisible(), timeout=TIMEOUT_MS)
        assert frame.toggleViewAction().shortcut().toString() == "Ctrl+Shift+M"
        _small(dock)
        dock.rate.setValue(0)  # refused in one line, nothing started
        dock.simulate_button.click()
        assert "rate must be positive" in dock.status.text() and not c.busy
        assert wb.running
        dock.rate.setValue(20)
        dock.simulate_button.click()
        assert c.busy and not wb.running  # live timing paused for the calibration
        qtbot.waitUntil(lambda: not c.busy, timeout=TIMEOUT_MS)
        assert wb.running, dock.status.text()  # resumed
        assert dock.table.rowCount() == 3, dock.status.text()
        labels = [dock.table.item(r, 0).text() for r in range(3)]
        assert labels == ["colocated ×2", "chunked 128 ×2", "disagg 1P+1D"]
        for row in c.table.rows:
            numbers = (row.ttft_p50, row.ttft_p99, row.tpot_p50, row.tpot_p99, row.tokens_per_s)
            assert all(math.isfinite(v) and v > 0 for v in numbers) and row.requests == 8
        assert (
            "simulated p99 within the SLOs" in dock.status.text()
            or "no layout" in dock.status.text()
        )

        dock.real_layout.setCurrentIndex(dock.real_layout.findData("colocated"))
        dock.real_button.click()
        qtbot.waitUntil(lambda: not c.busy, timeout=TIMEOUT_MS)
        real = [r for r in c.table.rows if not r.simulated]
        assert len(real) == 1, dock.status.text()
        r = real[0]
        assert r.layout == "colocated" and r.instances == 1 and r.requests == 8
        assert all(math.isfinite(v) and v > 0 for v in (r.ttft_p50, r.ttft_p99, r.tpot_p99))
        twin = c.table.rows[c.table.rows.index(r) - 1]  # the simulated row of that layout
        assert (twin.layout, twin.instances, twin.simulated) == ("colocated", 1, True)
        assert dock.table.rowCount() == 5 and dock.table.item(1, 1).text() == "real"
        assert "real colocated ×1: p99 " in dock.status.text()
        assert wb.running

        # the live run resumed (its RunStarted shows its config in the panel), then the live
        # precision, when weight-only, is served: the desk's workload has the panel's edit
        # once it settles (debounced)
        n = wb.generation.stats.total
        qtbot.waitUntil(lambda: wb.generation.stats.total > n, timeout=TIMEOUT_MS)
        panel = wb.window.config_panel
        panel.precision.setCurrentIndex(panel.precision.findData("int4-weights"))
        qtbot.waitUntil(
            lambda: wb.desk.workload.config.precision == "int4-weights",  # type: ignore[union-attr]
            timeout=5_000,
        )
        dock.simulate_button.click()
        qtbot.waitUntil(lambda: not c.busy, timeout=TIMEOUT_MS)
        assert "served in int4-weights" in dock.status.text(), dock.status.text()
        assert dock.table.rowCount() == 3, dock.status.text()  # a new study replaces
        # every study landed in the window's session, beside its live runs
        wb.recording.flush()
        with open_session_file(wb.recording.path) as reader:
            studies = reader.llm_studies()
            assert reader.runs(), "the live runs are there too"
        assert [s.kind for s in studies] == ["simulate", "real", "simulate"]
        assert [len(s.rows) for s in studies] == [3, 2, 3]
        assert studies[1].rows[1]["simulated"] is False and studies[1].status == "complete"
        assert studies[2].config is not None and studies[2].config.precision == "int4-weights"
        # and a teammate opening the file sees them in the session window's Studies tab
        window = SessionWindow(wb.recording.path, wb.jobs)
        qtbot.addWidget(window)
        tabs = [window.tabs.tabText(i) for i in range(window.tabs.count())]
        assert tabs[-1] == "Studies"
        table = window.tabs.widget(tabs.index("Studies")).findChild(QTableWidget, "llm_studies")
        assert table.rowCount() == 3 + 3 + 3 + 2  # a title row per study, a row per layout
        assert table.item(0, 0).text().startswith("study 1: demo_llm, simulated")
        assert table.item(5, 1).text() == "sim" and table.item(6, 1).text() == "real"
        window.close()
    finally:
        wb.shutdown()


def _as_loaded(wb: Workbench, path: str) -> None:
    """The desk hears that the host loaded `path` (a study runs on the desk's workload; the
    host need not run the model for it)."""
    wb.desk.loading(path, None)
    info = ModelInfo(path, "", 0, 0, "", {}, (), (), 0, 0, {}, 0, 0)
    wb.desk.on_events([ModelLoaded(info)])


def _job_processes(wb: Workbench) -> list[psutil.Process]:
    """The engine host's job processes (not multiprocessing's resource tracker): spawned by
    the host, or forked from its jobs' fork server (engine/run/job_start.py), a child of the
    host's whose children are the jobs."""
    assert wb.client.pid is not None
    jobs = []
    for kid in psutil.Process(wb.client.pid).children():
        with contextlib.suppress(psutil.Error):
            line = " ".join(kid.cmdline())
            if "multiprocessing.forkserver" in line:
                jobs += kid.children()
            elif "resource_tracker" not in line:
                jobs.append(kid)
    return [p for p in jobs if p.is_running()]


def test_cancel_stops_a_calibration_and_a_real_run(
    qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))  # a cold cache: the
    wb = Workbench(session_path=str(tmp_path / "cancel.opscope"), usable=["cpu"])  # job calibrates
    qtbot.addWidget(wb.window)
    c = wb.room(LLMServingController)
    dock = c.view
    wb.client.start()  # the engine host runs the study (no model loaded in it: none needed)
    try:
        _as_loaded(wb, str(DEMO_LLM))
        assert c.model == str(DEMO_LLM)
        dock.simulate_button.click()
        qtbot.waitUntil(lambda: bool(_job_processes(wb)), timeout=TIMEOUT_MS)
        (proc,) = _job_processes(wb)
        qtbot.waitUntil(lambda: "calibration" in dock.progress.format(), timeout=TIMEOUT_MS)
        dock.cancel_button.click()
        qtbot.waitUntil(lambda: not c.busy, timeout=10_000)
        assert dock.status.text().startswith("calibration cancelled: the rounds it measured")
        qtbot.waitUntil(lambda: not proc.is_running(), timeout=10_000)  # (ending, told)
        (kept,) = (tmp_path / "cache").rglob("llm-*.json")  # the rounds it finished, kept
        assert isinstance(json.loads(kept.read_text())["points"], dict)
        assert c.table.rows == [] and wb.running

        _small(dock, requests=5000, rate=50.0)
        dock.real_layout.setCurrentIndex(dock.real_layout.findData("chunked"))
        dock.real_button.click()
        assert dock.cancel_button.isEnabled()
        qtbot.waitUntil(lambda: bool(_job_processes(wb)), timeout=TIMEOUT_MS)
        (proc,) = _job_processes(wb)
        qtbot.waitUntil(lambda: "serving" in dock.progress.format(), timeout=TIMEOUT_MS)
        dock.cancel_button.click()
        qtbot.waitUntil(lambda: not c.busy, timeout=10_000)
        # stopped as Ctrl+C stops it: before the loop, nothing; in it, what it served
        status = dock.status.text()
        real = [r for r in c.table.rows if not r.simulated]
        assert (status == "real run cancelled" and not real) or (
            status.startswith("real run cancelled: what it served is kept")
            and "interrupted (SIGTERM)" in status
            and len(real) == 1
        ), status
        qtbot.waitUntil(lambda: not proc.is_running(), timeout=10_000)  # (ending, told)
        assert dock.real_button.isEnabled() and not dock.cancel_button.isEnabled()
        with open_session_file(wb.recording.path) as reader:  # what it served is kept
            studies = reader.llm_studies()
        assert [s.status for s in studies] == (["partial"] if real else [])
    finally:
        wb.shutdown()


def test_live_simulates_again_once_the_settings_settle(qtbot: QtBot, tmp_path: Path) -> None:
    """Issue 28, item 5 in the window: with Live ticked, a change of any setting simulates
    the layouts again half a second after the last change (a burst of changes is one
    study), a change while a study runs is simulated after it, and unticked nothing runs
    by itself. Each study is in the session."""
    wb = Workbench(session_path=str(tmp_path / "live.opscope"), usable=["cpu"])
    qtbot.addWidget(wb.window)
    wb.window.show()
    wb.start(str(DEMO_LLM))
    c = wb.room(LLMServingController)
    dock = c.view

    def served(n: int) -> bool:
        rows = c.table.rows
        return not c.busy and len(rows) == 3 and all(r.requests == n for r in rows)

    def studies() -> list[int]:
        wb.recording.flush()
        with open_session_file(wb.recording.path) as reader:
            return [s.rows[0]["requests"]["count"] for s in reader.llm_studies()]

    try:
        qtbot.waitUntil(lambda: c.model is not None, timeout=TIMEOUT_MS)
        _small(dock)
        assert not c.busy and not c.table.rows  # nothing runs by itself yet
        dock.live.setChecked(True)  # ticking it simulates what the dock shows
        qtbot.waitUntil(lambda: served(8), timeout=TIMEOUT_MS)
        for n in (9, 10, 11, 12):  # a burst of changes
            dock.requests.setValue(n)
        qtbot.waitUntil(lambda: served(12), timeout=TIMEOUT_MS)
        assert studies() == [8, 12]
        dock.requests.setValue(13)
        qtbot.waitUntil(lambda: c.busy, timeout=TIMEOUT_MS)
        dock.requests.setValue(14)  # while that study runs: simulated after it
        qtbot.waitUntil(lambda: served(14), timeout=TIMEOUT_MS)
        assert studies() == [8, 12, 13, 14]
        dock.live.setChecked(False)
        dock.requests.setValue(15)
        qtbot.wait(1500)
        assert not c.busy and studies() == [8, 12, 13, 14]
        assert dock.status.text().startswith("simulated 14 requests"), dock.status.text()
    finally:
        wb.shutdown()
