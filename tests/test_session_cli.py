"""`--session FILE` on bench/profile and `opscope session show`, end to end: appending runs,
the JSON shape, a run killed with SIGKILL, refused files, and text shown as text."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.errors import SessionFileError
from engine.events import Notice, RunStarted
from engine.model.info import load_model
from engine.session import SCHEMA_VERSION, Recorder, SessionStore, open_session_file
from tests.conftest import DEMO_CNN, ROOT
from tests.session_material import BAD_KINDS, bad_file, live_events
from tests.test_cli import FAST, opscope


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bench run, then a profile run appended to the same file through the CLI."""
    path = tmp_path_factory.mktemp("cli") / "two.opscope"
    opscope("bench", DEMO_CNN, *FAST, "--session", path, check=True)
    opscope(
        "profile", DEMO_CNN, "--batch", "2", *FAST, "--runs", "5", "--session", path, check=True
    )
    return path


def test_bench_and_profile_append_runs(two_runs: Path, tmp_path: Path) -> None:
    with open_session_file(two_runs) as reader:
        runs = reader.runs()
        assert [(r.id, r.kind, r.status, r.batch) for r in runs] == [
            (1, "bench", "ok", 1),
            (2, "profile", "ok", 2),
        ]
        assert all(r.samples >= 5 and r.latency and r.latency.count == r.samples for r in runs)
        assert reader.ops(1) == [] and len(reader.ops(2)) > 5
        assert reader.op_events(2) and reader.profiles(2)[0].runs == 5
    proc = opscope("session", "show", two_runs, check=True)
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"session {two_runs}: 2 runs, format v{SCHEMA_VERSION}")
    assert lines[1].split()[:5] == ["run", "kind", "from", "started", "model"]
    rows = lines[2:]
    assert len(rows) == 2
    assert rows[0].split()[:2] == ["1", "bench"] and rows[1].split()[1] == "profile"
    assert "demo_cnn.onnx" in rows[0] and "batch=1" in rows[0]
    assert rows[1].split()[0] == "2" and "batch=2" in rows[1] and rows[1].endswith("ok")
    assert "CPU" in rows[0]


def test_show_json_shape(two_runs: Path, tmp_path: Path) -> None:
    out = tmp_path / "show.json"
    opscope("session", "show", two_runs, "--json", out, check=True)
    data = json.loads(out.read_text())
    assert set(data) == {"runs", "meta", "machines", "sweeps", "memory", "llm_studies"}
    assert data["sweeps"] == data["memory"] == data["llm_studies"] == []
    assert (
        data["meta"]["schema_version"] == str(SCHEMA_VERSION)
        and data["meta"]["format"] == "opscope-session"
    )
    first = data["runs"][0]
    assert {
        "id",
        "config",
        "latency_ms",
        "throughput",
        "accuracy",
        "provider_used",
        "status",
        "model",
        "samples",
        "started_at",
        "ended_at",
        "variant",
        "error",
    } <= set(first)
    assert first["config"]["batch"] == 1 and first["provider_used"] == "CPUExecutionProvider"
    assert set(first["latency_ms"]) == {
        "count",
        "mean",
        "std",
        "min",
        "p50",
        "p90",
        "p95",
        "p99",
        "max",
        "p50_ci",
        "p99_ci",
    }
    assert first["latency_ms"]["count"] == first["samples"] >= 5
    assert first["machine"]["contention"]["verdict"] in ("quiet", "busy")
    assert first["throughput"]["samples_per_s"] > 0 and first["accuracy"] is None
    assert data["runs"][1]["throughput"]["samples_per_s"] == pytest.approx(
        2 * data["runs"][1]["throughput"]["inferences_per_s"]
    )

    proc = opscope("session", "show", f"{two_runs}:2", "--json", "-", check=True)
    only = json.loads(proc.stdout)
    assert [r["id"] for r in only["runs"]] == [2]
    assert "2 " in proc.stderr.splitlines()[-1]  # the table goes to stderr with --json -


def test_a_killed_run_keeps_its_samples(tmp_path: Path) -> None:
    path = tmp_path / "killed.opscope"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "app.entry",
            "bench",
            str(DEMO_CNN),
            "--duration",
            "30",
            "--session",
            str(path),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=os.environ.copy(),
    )
    try:
        deadline = time.monotonic() + 120
        seen = 0
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with open_session_file(path) as reader:
                    runs = reader.runs()
                    seen = reader.latency(runs[0].id)[1].size if runs else 0
            except SessionFileError:  # not created or not initialised yet
                seen = 0
            if seen:
                break
            time.sleep(0.1)
        assert seen > 0, proc.stderr.read().decode() if proc.poll() is not None else "timeout"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        assert proc.stderr is not None
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    assert Path(f"{path}-wal").exists()  # nobody checkpointed: the data sits in the WAL
    with open_session_file(path) as reader:
        (run,) = reader.runs()
        # still `running` in the file; its writer gone, readers say so (#16)
        assert run.status == "interrupted" and run.ended_at is None and run.latency is None
        starts, lats = reader.latency(run.id)
        assert run.samples == lats.size >= seen > 0
        assert (lats > 0).all() and (starts[1:] > starts[:-1]).all()
    show = opscope("session", "show", path, check=True)
    last = show.stdout.splitlines()[-1]
    assert f"figures from its {run.samples:,} recorded samples" in last
    assert last.endswith("(killed or crashed)")
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert conn.execute("SELECT status FROM runs").fetchall() == [("running",)]  # untouched
    conn.close()


def test_a_failed_run_is_recorded(tmp_path: Path) -> None:
    path = tmp_path / "failed.opscope"
    proc = opscope("bench", tmp_path / "missing.onnx", "--session", path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    with open_session_file(path) as reader:
        (run,) = reader.runs()
        assert run.status == "error" and run.error and "file not found" in run.error
        assert run.config is not None and run.config.batch == 1


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_show_refuses_bad_files_with_exit_2(kind: str, tmp_path: Path, two_runs: Path) -> None:
    path, fragment = bad_file(kind, tmp_path, two_runs)
    proc = opscope("session", "show", path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith(f"opscope: error: {path}: ")
    assert fragment in line.removeprefix(f"opscope: error: {path}: ")


def test_bench_refuses_to_record_into_a_foreign_file(tmp_path: Path, two_runs: Path) -> None:
    path, _ = bad_file("foreign", tmp_path, two_runs)
    before = path.read_bytes()
    proc = opscope("bench", DEMO_CNN, *FAST, "--session", path)
    assert proc.returncode == 2 and "not an OpScope session" in proc.stderr
    assert "Traceback" not in proc.stderr and path.read_bytes() == before


def test_text_from_the_file_is_shown_as_text(tmp_path: Path) -> None:
    """A teammate's file can hold any text: ANSI escapes, newlines, bidi overrides. The
    table shows them escaped, one line per run, and never sends an ESC to the terminal."""
    path = tmp_path / "evil.opscope"
    info = load_model(DEMO_CNN)[1]
    evil = dataclasses.replace(
        info, path=str(tmp_path / "\x1b[2J\x1b[31mred\nfake row.onnx"), sha256="0" * 64
    )
    e = live_events(evil)
    with SessionStore.create_or_open(path) as store:
        rec = Recorder(store)
        started: RunStarted = e["started"]
        for ev in (e["loaded"], Notice("info", "\x1b]0;pwned\x07"), started):
            rec.feed(ev)
        rec.fail("boom\x1b[0m\nopscope: all good\u202eexe.txt")
        rec.close()
    proc = opscope("session", "show", path, check=True)
    assert "\x1b" not in proc.stdout and "\u202e" not in proc.stdout
    lines = proc.stdout.splitlines()
    assert len(lines) == 3  # header, column names, one run
    assert "\\x1b[2J\\x1b[31mred\\nfake row.onnx" in lines[2]
    assert "boom\\x1b[0m\\nopscope: all good\\u202eexe.txt" in lines[2]
    out = tmp_path / "evil.json"
    opscope("session", "show", path, "--json", out, check=True)
    assert "\x1b" not in out.read_text()  # JSON escapes control characters itself
    assert json.loads(out.read_text())["runs"][0]["model"]["name"].startswith("\x1b[2J")
