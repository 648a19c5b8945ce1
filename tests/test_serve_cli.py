"""`opscope load` and `opscope simulate` as a user runs them: the JSON contract, the
answers, and bad input as one line with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import DEMO_CNN
from tests.test_cli import opscope

KEYS = {"traffic", "batching", "cache", "requests", "latency_ms", "queue_ms", "service_ms",
        "batch_size", "throughput", "queue_depth", "generator", "simulated"}  # fmt: skip


def test_load_json_contract(tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    opscope("load", DEMO_CNN, "--traffic", "poisson:200", "--duration", "1.5", "--warmup-s", "0.5",
            "--max-batch", "4",
            "--delay-ms", "1", "--cache", "100", "--repeat", "0.3", "--threads", "1",
            "--json", out, check=True)  # fmt: skip
    r = json.loads(out.read_text())
    assert set(r) >= KEYS and r["simulated"] is False
    req = r["requests"]
    assert req["completed"] + req["rejected"] + req["timed_out"] == req["sent"] > 100
    assert r["traffic"]["kind"] == "poisson" and r["traffic"]["closed_loop"] is False
    assert r["batching"]["max_batch"] == 4 and r["cache"]["hit_rate"] > 0.1
    assert 0 < req["warmup"] < req["sent"] and r["warmup_s"] == 0.5
    assert r["latency_ms"]["count"] == req["completed"] - req["warmup"]  # warm-up kept out
    assert r["provider_used"] == "CPUExecutionProvider"


def test_simulate_answers_and_reuses_its_calibration(tmp_path: Path) -> None:
    out = tmp_path / "sim.json"
    args = ["simulate", DEMO_CNN, "--traffic", "poisson:300", "--requests", "3000",
            "--max-batch", "4", "--delay-ms", "1", "--threads", "1"]  # fmt: skip
    first = opscope(*args, "--find", "max-rate", "--slo-p99", "20", "--json", out, check=True)
    r = json.loads(out.read_text())
    assert set(r) >= KEYS and r["simulated"] is True
    assert r["calibration"]["sizes"] == [1, 2, 4]
    assert r["max_rate"] > 100 and r["find"]["at_max_rate"]["latency_ms"]["p99"] <= 20
    assert "max rate" in first.stdout
    again = opscope(*args, "--curve", "--json", out, check=True)
    assert "calibration from the cache" in again.stderr
    curve = json.loads(out.read_text())["curve"]
    assert len(curve) == 16 and sum(p["knee"] for p in curve) == 1


def test_tune_batching_prefers_batching_under_load(tmp_path: Path) -> None:
    out = tmp_path / "tune.json"
    opscope("simulate", DEMO_CNN, "--traffic", "poisson:500", "--requests", "2000",
            "--max-batch", "8", "--tune-batching", "--slo-p99", "30", "--threads", "1",
            "--json", out, check=True)  # fmt: skip
    r = json.loads(out.read_text())
    assert r["best"]["max_rate"] == max(t["max_rate"] for t in r["trials"])
    one = max(t["max_rate"] for t in r["trials"] if t["max_batch"] == 1)
    assert r["best"]["max_rate"] >= one


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--traffic", "poisson:-3"], "rate must be positive"),
        (["--traffic", "burst:1"], "expected one of"),
        (["--traffic", "poisson:10", "--preferred", "4,x"], "--preferred"),
        (["--traffic", "poisson:10", "--max-batch", "2", "--preferred", "4"], "preferred batch"),
        (["--traffic", "trace:/nonexistent.csv"], "not found"),
    ],
)
def test_bad_serving_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    proc = opscope("load", DEMO_CNN, "--duration", "1", *args)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("opscope: error")]
    assert len(lines) == 1 and message in lines[0]
    assert "Traceback" not in proc.stderr


def test_load_runs_land_in_a_session(tmp_path: Path) -> None:
    """A load run is a run of kind `load`: its end-to-end latencies (after the warm-up)
    are the run's samples, so session show, compare and report read it like any run; a
    simulated run files its predicted latencies as kind `simulate`, labelled in compare."""
    from engine.session.reader import SessionReader

    path = tmp_path / "s.opscope"
    for rate in ("150", "300"):
        opscope("load", DEMO_CNN, "--traffic", f"poisson:{rate}", "--duration", "1.5",
                "--warmup-s", "0.5", "--threads", "1", "--session", path, check=True)  # fmt: skip
    with SessionReader.open(path) as reader:
        runs = reader.runs()
        assert [r.kind for r in runs] == ["load", "load"]
        starts, lats = reader.latency(runs[0].id)
        assert runs[0].latency is not None and lats.size == runs[0].latency.count > 50
        assert np.all(np.diff(starts) >= 0) and runs[0].throughput is not None
    show = opscope("session", "show", path, check=True)
    assert show.stdout.splitlines()[2].split()[1] == "load"
    compared = opscope("compare", f"{path}:1", f"{path}:2", check=True)
    assert "p50 ms" in compared.stdout
    opscope("simulate", DEMO_CNN, "--traffic", "poisson:150", "--duration", "1.5",
            "--warmup-s", "0.5", "--threads", "1", "--session", path, check=True)  # fmt: skip
    with SessionReader.open(path) as reader:
        simulated = reader.runs()[-1]
        assert simulated.kind == "simulate" and simulated.samples > 50
    against = opscope("compare", f"{path}:1", f"{path}:3", check=True).stdout
    assert "[served under load]" in against and "[SIMULATED]" in against
