"""Serving runs in a session file, as the session tools show them: the report's serving
section (latency over time above the traffic, queue depth, batch sizes, the capacity
curve), the trace export (a slice per batch, a queue-depth counter) and `compare` saying
when the load changed or when the latencies are not like for like."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from engine.analysis import serving_trace
from engine.analysis.serving_trace import serving_trace_events
from engine.serve.records import depth_series
from engine.session.reader import SessionReader
from tests.built_once import Built, built_once
from tests.conftest import DEMO_CNN
from tests.test_cli import opscope

LOAD = ["--threads", "1"]
# run 1: a real load run (bursts, batching); 2: a simulated run with its capacity curve;
# 3: a real load run of another traffic and batching; 4: a plain bench run
RUNS: list[list[str | Path]] = [
    ["load", DEMO_CNN, "--traffic", "bursts:100,600,1,0.3", "--duration", "3",
     "--max-batch", "4", "--delay-ms", "1", *LOAD],
    ["simulate", DEMO_CNN, "--traffic", "poisson:300", "--duration", "3", "--max-batch", "4",
     "--curve", *LOAD],
    ["load", DEMO_CNN, "--traffic", "poisson:200", "--duration", "2", "--max-batch", "1", *LOAD],
    ["bench", DEMO_CNN, "--duration", "0.5", "--warmup", "3", "--no-live", "--no-accuracy",
     *LOAD],
]  # fmt: skip


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Recorded once per test run (tests/built_once.py); the tests here only read it."""

    def record(folder: Path) -> Built:
        path = folder / "serving.opscope"
        for args in RUNS:
            proc = opscope(*args, "--session", path, check=True)
            said = proc.stdout + proc.stderr  # every recording command says where it went
            assert f"recorded   {path}" in said, said
        with SessionReader.open(path) as reader:
            assert [r.kind for r in reader.runs()] == ["load", "simulate", "load", "bench"]
        return path, {}

    return built_once(tmp_path_factory, "serving-session", record)[0]


@pytest.fixture(scope="module")
def report(session: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    def write(folder: Path) -> Built:
        out = folder / "serving.html"
        opscope("report", session, "-o", out, check=True)
        return out, {}

    return built_once(tmp_path_factory, "serving-report", write)[0].read_text(encoding="utf-8")


def serving_section(html: str) -> str:
    start = html.index('<section id="serving">')
    return html[start : html.index("</section>", start)]


def run_block(section: str, run_id: int) -> str:
    """The part of the serving section about one run (up to the next run's heading)."""
    parts = re.split(r"(?=<h3>Run \d+:)", section)
    return next(p for p in parts if p.startswith(f"<h3>Run {run_id}:"))


def test_report_draws_a_load_run(report: str) -> None:
    assert '<a href="#serving">Serving</a>' in report
    load = run_block(serving_section(report), 1)
    assert "served under load" in load and "SIMULATED" not in load
    assert "bursts:100,600,1,0.3 (open loop" in load  # the set-up table
    assert "max batch 4, delay 1 ms" in load
    for figure in ("requests sent", "rejected", "timed out", "cache hits", "throughput"):
        assert f"<td>{figure}" in load
    assert load.count("<svg") == 2  # latency and traffic; queue depth and batch sizes
    for text in ("end-to-end latency (ms)", "requests/s", "warm-up (1 s",
                 "requests waiting", "batch size (after the warm-up)"):  # fmt: skip
        assert text in load, text
    assert "capacity curve" not in load


def test_report_labels_a_simulated_run_and_draws_its_curve(report: str) -> None:
    sim = run_block(serving_section(report), 2)
    assert '<span class="badge sim">SIMULATED</span>' in sim
    assert "latency p50 / p90 / p99 (predicted)" in sim
    assert sim.count("<svg") == 3 and "capacity curve (SIMULATED)" in sim
    assert "offered load (requests/s)" in sim and "knee" in sim
    assert "poisson:300" in sim and "median service time per batch size" in sim
    assert "<h3>Run 4:" not in serving_section(report)  # a bench run is no serving run


def test_report_comparison_names_the_load_change(report: str) -> None:
    comparison = report[report.index('<section id="comparison">') :]
    row = next(r for r in comparison.split("<tr>") if r.startswith('<td class="r">3</td>'))
    assert "traffic: bursts:100,600,1,0.3 → poisson:200" in row and "max batch 4 → 1" in row


def test_trace_has_a_slice_per_batch_and_the_queue_depth(session: Path, tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    opscope("export", session, "--run", "1", "--trace", out, check=True)
    events = json.loads(out.read_text())["traceEvents"]
    assert {e["pid"] for e in events} == {1}
    with SessionReader.open(session) as reader:
        s = reader.serving(1)
    assert s is not None and s.summary is not None
    r = s.records
    batches = [e for e in events if e["ph"] == "X"]
    assert len(batches) == r.batch_start.size > 0
    assert {e["tid"] for e in batches} == {int(i) + 1 for i in np.unique(r.batch_instance)}
    threads = {e["tid"]: e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert threads[1] == "instance 0"
    assert [e["args"]["size"] for e in batches] == r.batch_size.tolist()
    assert all(e["name"] == f"batch of {e['args']['size']}" for e in batches)
    assert sum(e["args"]["requests"] for e in batches) == int((r.batch >= 0).sum())
    assert batches[0]["ts"] == pytest.approx(r.batch_start[0] * 1e6, abs=1e-3)
    assert all(e["dur"] >= 0 for e in batches)
    counter = [e for e in events if e["ph"] == "C"]
    assert {e["name"] for e in counter} == {"queue"}
    depth = np.array([e["args"]["depth"] for e in counter])
    ts = np.array([e["ts"] for e in counter])
    assert depth.max() == depth_series(r)[1].max()
    # the summary's maximum is over the steady state: from the first request due after it
    first_steady = r.scheduled[r.scheduled >= r.scheduled.min() + s.warmup_s].min()
    assert depth[ts >= first_steady * 1e6 - 1e-3].max() == s.summary["queue_depth"]["max"]
    assert any(e["name"] == "warm-up ends" for e in events)


def test_trace_of_the_whole_session_and_its_bound(
    session: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "all.json"
    proc = opscope("export", session, "--trace", out, check=True)
    data = json.loads(out.read_text())
    assert {e["pid"] for e in data["traceEvents"]} == {1, 2, 3}  # the bench run has no profile
    names = {
        e["pid"]: e["args"]["name"] for e in data["traceEvents"] if e["name"] == "process_name"
    }
    assert "[SIMULATED: poisson:300]" in names[2] and "[served under load" in names[1]
    assert "truncated" not in data["otherData"] and "note:" not in proc.stderr
    monkeypatch.setattr(serving_trace, "MAX_BATCHES", 10)
    with SessionReader.open(session) as reader:
        run, s = reader.run(1), reader.serving(1)
        assert s is not None
        trace = serving_trace_events(run, s)
    assert len([e for e in trace.events if e["ph"] == "X"]) == 10
    assert trace.notes and "keeps the first 10" in trace.notes[0]
    last_end = max(e["ts"] + e["dur"] for e in trace.events if e["ph"] == "X")
    assert max(e["ts"] for e in trace.events if e["ph"] == "C") <= last_end + 1e-3
    monkeypatch.setattr(serving_trace, "MAX_BATCHES", 10**9)
    monkeypatch.setattr(serving_trace, "MAX_COUNTER", 40)
    thinned = serving_trace_events(run, s)
    counter = [e["args"]["depth"] for e in thinned.events if e["ph"] == "C"]
    assert len(counter) <= 41 and max(counter) == depth_series(s.records)[1].max()
    assert any("peak" in n for n in thinned.notes)


def test_compare_says_the_load_changed(session: Path, tmp_path: Path) -> None:
    out = tmp_path / "compare.json"
    proc = opscope("compare", f"{session}:3", f"{session}:1", "--json", out)
    assert proc.returncode in (0, 3, 4), proc.stderr  # 4: measured busy
    load = next(ln for ln in proc.stdout.splitlines() if ln.startswith("load "))
    assert "traffic: poisson:200 -> bursts:100,600,1,0.3" in load
    assert "max batch 1 -> 4" in load and "batch delay 0 ms -> 1 ms" in load
    assert "note: the load changed" in proc.stdout
    data = json.loads(out.read_text())
    assert data["load_diff"]["traffic"] == ["poisson:200", "bursts:100,600,1,0.3"]
    assert data["load_diff"]["max_batch"] == [1, 4]
    assert "max batch 1 -> 4" in data["load_changes"]
    assert data["latency_kind"] == {"baseline": "end to end under load"} | {
        "candidate": "end to end under load"
    }
    assert data["baseline"]["kind"] == "load"


def test_compare_a_served_run_with_a_bench_run(session: Path, tmp_path: Path) -> None:
    out = tmp_path / "mixed.json"
    proc = opscope("compare", f"{session}:4", f"{session}:2", "--json", out)
    assert proc.returncode == 4, proc.stderr  # per inference against end to end: no verdict
    assert "NO VERDICT: not like for like (other latencies (per inference vs end" in proc.stdout
    assert "[SIMULATED]" in proc.stdout
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("latency "))
    assert "baseline per inference" in line and "end to end under load, SIMULATED" in line
    assert not any(ln.startswith("load ") for ln in proc.stdout.splitlines())
    data = json.loads(out.read_text())
    assert data["latency_kind"]["baseline"] == "per inference" and data["load_diff"] == {}
    assert any("compares different things" in n for n in data["notes"])
