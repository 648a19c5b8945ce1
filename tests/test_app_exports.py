"""Exports from the window: export jobs run through the window's one runner in the engine
host, with a busy strip (and Cancel) that ends in the saved path and an Open button, or in
the error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.host.engine_client import EngineClient
from app.host.job_runner import JobRunner
from app.sessions.exports import ExportNotice
from tests.session_material import record_demo_profile


@pytest.fixture
def jobs(qapp) -> Iterator[JobRunner]:  # type: ignore[no-untyped-def]
    """The window's runner on a real engine host (no model loaded)."""
    client = EngineClient()
    client.start()
    try:
        yield JobRunner(client)
    finally:
        client.shutdown()


def test_report_is_written_by_a_job_and_says_where(
    qtbot: QtBot, tmp_path: Path, jobs: JobRunner
) -> None:
    session = tmp_path / "demo.opscope"
    record_demo_profile(session)
    notice = ExportNotice(jobs)
    qtbot.addWidget(notice)
    out = tmp_path / "report.html"
    notice.start("report", str(session), str(out))
    assert notice.isVisible() and notice.busy and jobs.busy(notice.concern)
    assert notice.text.text().startswith(f"Writing report {out}")
    assert notice.bar.isVisible() and not notice.open_button.isVisible()
    qtbot.waitUntil(lambda: not notice.busy, timeout=60_000)
    assert notice.text.text().startswith(f"Report saved: {out}")
    assert notice.saved == str(out) and out.stat().st_size > 1000
    assert notice.open_button.isVisible() and not notice.bar.isVisible()
    assert not notice.cancel_button.isVisible()


def test_a_cancelled_export_leaves_the_file_as_it_was(
    qtbot: QtBot, tmp_path: Path, jobs: JobRunner
) -> None:
    session = tmp_path / "demo.opscope"
    record_demo_profile(session)
    out = tmp_path / "report.html"
    out.write_text("yesterday's report")
    notice = ExportNotice(jobs)
    qtbot.addWidget(notice)
    notice.start("report", str(session), str(out))
    assert notice.cancel_button.isVisible()
    notice.cancel_button.click()  # before the job's process has even started its writer
    qtbot.waitUntil(lambda: not notice.busy, timeout=60_000)
    assert notice.text.text() == f"Report cancelled: {out} was not written"
    assert out.read_text() == "yesterday's report" and notice.saved is None
    assert not notice.cancel_button.isVisible() and not notice.open_button.isVisible()


def test_a_failed_export_says_why_in_one_line(
    qtbot: QtBot, tmp_path: Path, jobs: JobRunner
) -> None:
    notice = ExportNotice(jobs)
    qtbot.addWidget(notice)
    missing = tmp_path / "missing.opscope"
    notice.start("trace", str(missing), str(tmp_path / "t.json"))
    qtbot.waitUntil(lambda: not notice.busy, timeout=30_000)
    text = notice.text.text()
    assert text.startswith("Cannot export trace: ") and "missing.opscope" in text
    assert "\n" not in text and notice.saved is None and not notice.open_button.isVisible()


def test_a_read_only_session_window_exports_its_own_file_and_picks_the_run(
    qtbot: QtBot, tmp_path: Path, monkeypatch, jobs: JobRunner
) -> None:  # type: ignore[no-untyped-def]
    """A teammate's file opened read-only: File > Export Report writes a report of that
    file (not your own session); Export Trace asks which run, the selected one first."""
    import json

    from PySide6.QtWidgets import QFileDialog, QInputDialog

    from app.sessions.exports import ALL_RUNS
    from app.sessions.session_window import SessionWindow

    session = tmp_path / "teammate.opscope"
    record_demo_profile(session)
    record_demo_profile(session)  # two profiled runs: the picker must choose
    window = SessionWindow(session, jobs)
    qtbot.addWidget(window)
    window.table.selectRow(0)  # run 1
    asked: list[list[str]] = []

    def get_item(_parent, _title, _label, items, current, _editable):  # type: ignore[no-untyped-def]
        asked.append(list(items))
        return items[current], True

    out = {"report": tmp_path / "r.html", "trace": tmp_path / "t.json"}
    kind = {"now": "report"}
    monkeypatch.setattr(QInputDialog, "getItem", staticmethod(get_item))
    monkeypatch.setattr(
        QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(out[kind["now"]]), ""))
    )
    menu = window.menuBar().actions()[0].menu()
    actions = {a.text().replace("&", ""): a for a in menu.actions()}
    actions["Export Report…"].trigger()
    qtbot.waitUntil(lambda: window.exports.saved == str(out["report"]), timeout=60_000)
    assert "teammate.opscope" in out["report"].read_text()
    kind["now"] = "trace"
    actions["Export Trace…"].trigger()
    qtbot.waitUntil(lambda: window.exports.saved == str(out["trace"]), timeout=60_000)
    (items,) = asked
    assert items[-1] == ALL_RUNS and len(items) == 3  # run 2, run 1, all
    assert items[0].startswith("run 2 · profile · demo_cnn.onnx · image 1x")
    trace = json.loads(out["trace"].read_text())
    pids = {e.get("args", {}).get("name", "") for e in trace["traceEvents"] if e.get("ph") == "M"}
    assert any("run 1" in p for p in pids) and not any("run 2" in p for p in pids), pids


def test_a_report_made_mid_run_has_the_running_runs_percentiles(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A report exported while a run records: its percentiles came out '-' although the
    file held 17,391 of its samples; now they come from those samples, and it says so."""
    from engine.analysis.report import build_report
    from engine.events import LatencyBatch
    from engine.model.workload import Workload
    from engine.run.bench import BenchRequest, run_bench
    from engine.session import Recorder, SessionStore
    from engine.session.store import open_session_file
    from tests.conftest import DEMO_CNN
    from tests.session_material import SHORT

    path = tmp_path / "midrun.opscope"
    req = BenchRequest(Workload(str(DEMO_CNN)), timing=SHORT)
    with SessionStore.create_or_open(path) as store:
        rec = Recorder(store, model_path=str(DEMO_CNN), kind="bench", config=req.workload.config)
        for ev in run_bench(req):
            rec.feed(ev)
            if isinstance(ev, LatencyBatch):
                break  # the run has samples, no timing summary: it is still running
        rec.flush()
        with open_session_file(path) as reader:
            (run,) = reader.runs()
            assert run.latency is None and run.samples > 0
            html = build_report(reader, path.name)
    assert f"figures from its {run.samples:,} recorded samples" in html
    from engine.cli.main import main

    assert main(["session", "show", str(path)]) == 0  # the CLI's table says the same
    assert f"figures from its {run.samples:,} recorded samples" in capsys.readouterr().out
    row = html[html.index('id="runs"') :].split("</tr>")[1]
    assert row.count("<td") > 5 and "<td>-</td><td>-</td><td>-</td>" not in row.replace(
        ' class="num"', ""
    )


def test_a_read_only_session_window_draws_the_selected_runs_graph(
    qtbot: QtBot, tmp_path: Path, jobs: JobRunner
) -> None:
    """The Graph tab of a teammate's file: the selected run's graph laid out by the graph
    job for its model file, its recorded profile painted; a run whose model file is not on
    this machine says so in one line."""
    import sqlite3

    from app.sessions.session_window import SessionWindow

    session = tmp_path / "teammate.opscope"
    record_demo_profile(session)
    window = SessionWindow(session, jobs)
    qtbot.addWidget(window)
    window.table.selectRow(0)
    window.tabs.setCurrentWidget(window.graph)
    qtbot.waitUntil(lambda: window.graph.result is not None, timeout=120_000)
    assert "recorded profile" in window.graph_status.text()
    assert window.graph.stats  # the run's per-node figures, by run node name
    window.close()
    gone = tmp_path / "gone.opscope"
    record_demo_profile(gone)
    with sqlite3.connect(gone) as db:  # the teammate's model path, absent here
        db.execute("UPDATE runs SET model_path = '/nowhere/model.onnx'")
    other = SessionWindow(gone, jobs)
    qtbot.addWidget(other)
    other.table.selectRow(0)
    other.tabs.setCurrentWidget(other.graph)
    assert "not on this machine" in other.graph_status.text()
    assert other.graph.result is None
