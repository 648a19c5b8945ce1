"""`opscope export`: the Chrome trace (valid JSON, one track per run, the median profiled
inference) and the CSV tables, from a real recorded session."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from engine.analysis.export import (
    ExportError,
    csv_cell,
    median_inference,
    trace_events,
    write_trace,
)
from engine.cli.main import main
from engine.errors import OpScopeError, SessionFileError
from engine.measure.op_trace import NodeEvent, ProfileTrace, RunSpan
from engine.session.rows import RunRow
from engine.session.store import open_session_file
from tests.built_once import demo_session_once
from tests.recorded_sessions import opscope

PROFILED = {1, 2, 4}  # run 3 of the demo session is a bench run


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_session_once(tmp_path_factory)[0]  # the run's one recording: only read here


def node(run: int, name: str, start: float, dur: float) -> NodeEvent:
    return NodeEvent(
        run_index=run,
        name=name,
        op_type="MatMul",
        provider="CPUExecutionProvider",
        start_us=start,
        dur_us=dur,
        input_shapes=(("float", (2, 8)), ("float", (8, 4))),
        output_shapes=(("float", (2, 4)),),
        activation_bytes=64,
        parameter_bytes=128,
        output_bytes=32,
    )


def test_the_median_inference_and_its_events() -> None:
    durations = [30.0, 10.0, 50.0, 20.0]  # sorted: 10 (1), 20 (3), 30 (0), 50 (2)
    trace = ProfileTrace(
        runs=tuple(RunSpan(i, 1000.0 * i, d) for i, d in enumerate(durations)),
        nodes=tuple(
            n
            for i, d in enumerate(durations)
            for n in (node(i, "a", 1.0, d / 2), node(i, "b", 1.0 + d / 2, d / 3))
        ),
    )
    assert median_inference(trace).run_index == 3  # the lower middle of an even count
    run = RunRow(
        **{f.name: None for f in dataclasses.fields(RunRow)}
        | {
            "id": 7,
            "kind": "profile",
            "status": "ok",
            "providers": (),
            "inputs": {},
            "samples": 0,
            "model_name": "m.onnx",
        }
    )
    events = trace_events(run, trace)
    meta = [e for e in events if e["ph"] == "M"]
    assert {e["name"] for e in meta} == {"process_name", "process_sort_index", "thread_name"}
    assert all(e["pid"] == 7 for e in events)
    ops = [e for e in events if e["ph"] == "X" and e["cat"] != "inference"]
    assert [e["name"] for e in ops] == ["a", "b"]
    assert ops[0]["dur"] == 10.0 and ops[1]["ts"] == 11.0
    assert ops[0]["args"]["flops"] == 2 * 2 * 8 * 4
    assert ops[0]["args"]["input_shapes"] == ["float[2x8]", "float[8x4]"]
    whole = next(e for e in events if e.get("cat") == "inference")
    assert whole["dur"] == 20.0


def test_trace_of_a_recorded_session(session: Path, tmp_path: Path) -> None:
    out, folder = tmp_path / "trace.json", tmp_path / "csv"
    proc = opscope("export", session, "--trace", out, "--csv", folder)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    events = data["traceEvents"]
    assert events and all({"ph", "ts", "pid", "tid"} <= set(e) for e in events)
    assert {e["pid"] for e in events} == PROFILED
    complete = [e for e in events if e["ph"] == "X"]
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in complete)
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names[4].startswith("run 4: demo_cnn.onnx FP32 fusion=off")
    assert {e["pid"] for e in events if e["name"] == "thread_name"} == PROFILED
    with open_session_file(session) as reader:
        for run_id in PROFILED:
            whole = next(e for e in complete if e["pid"] == run_id and e["cat"] == "inference")
            ops = [e for e in complete if e["pid"] == run_id and e["cat"] != "inference"]
            index = whole["args"]["run_index"]
            trace = reader.profile_trace(run_id)
            spans = sorted(r.dur_us for r in trace.runs)
            assert whole["dur"] == spans[(len(spans) - 1) // 2]  # the median inference
            node_us = sum(n.dur_us for n in trace.nodes if n.run_index == index)
            assert sum(e["dur"] for e in ops) == pytest.approx(node_us)
            assert 0.5 * whole["dur"] < node_us <= whole["dur"] * 1.001
            assert len(ops) == len(reader.ops(run_id))
            assert all(e["name"] and e["args"]["provider"] for e in ops)


def test_csv_tables(session: Path, tmp_path: Path) -> None:
    folder = tmp_path / "csv"
    assert main(["export", str(session), "--csv", str(folder)]) == 0
    runs, latency, ops = (read_csv(folder / f"{n}.csv") for n in ("runs", "latency", "ops"))
    with open_session_file(session) as reader:
        stored = reader.runs()
        assert [int(r["id"]) for r in runs] == [r.id for r in stored]
        assert runs[2]["batch"] == "8" and runs[3]["fusion"] == "off"
        assert stored[0].latency is not None
        assert float(runs[0]["p50_ms"]) == pytest.approx(stored[0].latency.p50)
        assert len(latency) == sum(r.samples for r in stored)
        starts, lats = reader.latency(2)
        mine = [r for r in latency if r["run_id"] == "2"]
        assert [int(r["index"]) for r in mine] == list(range(lats.size))
        assert np.array_equal([int(r["latency_ns"]) for r in mine], lats)
        assert np.array_equal([int(r["start_ns"]) for r in mine], starts)
        assert {int(r["run_id"]) for r in ops} == PROFILED
        nodes = [r for r in ops if r["run_id"] == "1" and r["kind"] == "node"]
        assert [r["name"] for r in nodes] == [o.name for o in reader.ops(1)]
        assert {r["kind"] for r in ops} == {"node", "op_type"}


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_formula_text_is_defused_in_csv() -> None:
    assert csv_cell('=HYPERLINK("http://x")') == '\'=HYPERLINK("http://x")'
    assert csv_cell("@SUM(A1)") == "'@SUM(A1)" and csv_cell("model.onnx") == "model.onnx"
    assert csv_cell(-1.5) == -1.5 and csv_cell(float("nan")) == "" and csv_cell(None) == ""
    assert csv_cell(True) == 1


def test_bad_input(session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "t.json")
    with pytest.raises(ExportError, match="run 3 has no profile"):
        write_trace(str(session), out, run_id=3)
    with pytest.raises(SessionFileError, match="no run 99"):
        write_trace(str(session), out, run_id=99)
    with pytest.raises(SessionFileError, match="file not found"):
        write_trace(str(tmp_path / "missing.opscope"), out)
    assert not Path(out).exists()
    assert main(["export", str(session), "--run", "3", "--trace", out]) == 2
    assert main(["export", str(session)]) == 2
    err = capsys.readouterr().err
    assert "run 3 has no profile" in err and "nothing to export" in err
    assert issubclass(ExportError, OpScopeError)
    write_trace(str(session), out, run_id=2)
    assert {e["pid"] for e in json.loads(Path(out).read_text())["traceEvents"]} == {2}
