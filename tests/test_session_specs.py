"""One declared spec per session record (engine/session/spec.py): its INSERT and its reader
round-trip every field by name, reordering its columns changes nothing, each of its
columns exists in the schema the explicit migrations build and is declared (bounds) in
engine/session/columns.py, and no reader of the session layer reads a row by position."""

from __future__ import annotations

import re
import sqlite3
from itertools import repeat
from pathlib import Path
from typing import Any

import pytest
from sqlite_utils import Database

from engine.measure.op_stats import OpStat
from engine.measure.op_trace import NodeEvent, RunSpan
from engine.session import columns, schema
from engine.session.generation_rows import GENERATION, STEPS
from engine.session.latency_rows import LATENCY
from engine.session.llm_study_rows import LLM_STUDIES
from engine.session.memory_rows import MEMORY
from engine.session.model_rows import MODELS, ModelRow
from engine.session.profile_rows import (
    OP_EVENTS,
    OP_NODES,
    OP_TIMES,
    OPS,
    PROFILE_RUNS,
    PROFILES,
    ProfileRow,
)
from engine.session.rows import RUNS
from engine.session.serving_rows import BATCHES, REQUESTS, SERVING
from engine.session.spec import RecordSpec
from engine.session.sweep_rows import SWEEPS
from engine.session.timeline_rows import MARKERS, TELEMETRY, MarkerRow

SPECS: list[RecordSpec[Any]] = [
    MODELS, RUNS, LATENCY, PROFILES, PROFILE_RUNS, OPS, OP_NODES, OP_TIMES, OP_EVENTS,
    TELEMETRY, MARKERS, SERVING, REQUESTS, BATCHES, SWEEPS, MEMORY, LLM_STUDIES, GENERATION,
    STEPS,
]  # fmt: skip

STAT = OpStat("conv1", "Conv", "CPUExecutionProvider", 1, 1.5, 1.25, 2.5, 0.5, 4096, 2.0,
              9000, 6.0, 2.2)  # fmt: skip
NODE = NodeEvent(
    run_index=0, name="conv1", op_type="Conv", provider="CPUExecutionProvider", start_us=1.5,
    dur_us=2.5, input_shapes=(("float", (1, 3)),), output_shapes=(("float", (1, 8)),),
    activation_bytes=12, parameter_bytes=96, output_bytes=32, parent="loop", self_us=2.0,
    node_index=4,
)  # fmt: skip
RUN_STORED = {
    "id": 1, "kind": "bench", "model_sha256": "abc", "model_path": "/m/a.onnx",
    "config": None, "provider_requested": "cpu", "provider_used": "CPUExecutionProvider",
    "providers": '["CPUExecutionProvider"]',
    "inputs": '{"x": {"shape": [1, 3], "dtype": "float32"}}',
    "batch": 1, "session_create_s": 0.25, "variant": '{"precision": "fp32"}', "status": "ok",
    "error": None, "started_at": "2026-01-01T00:00:00Z", "ended_at": "2026-01-01T00:01:00Z",
    "timing_origin_ns": 7, "host": "box", "app_version": "1.0", "samples": 3,
    "mean_ms": 1.0, "std_ms": 0.5, "min_ms": 0.5, "p50_ms": 1.0, "p90_ms": 1.5, "p95_ms": 1.75,
    "p99_ms": 2.0, "max_ms": 2.5, "p50_lo_ms": 0.9, "p50_hi_ms": 1.1, "p99_lo_ms": 1.8,
    "p99_hi_ms": 2.2, "inferences_per_s": 1000.0, "samples_per_s": 1000.0, "stable": 1,
    "warmup_runs": 2, "elapsed_s": 3.0, "accuracy": None, "contention": None,
}  # fmt: skip
RUN_READ = RUN_STORED | {
    "model_name": None,
    "providers": ["CPUExecutionProvider"],
    "inputs": {"x": {"shape": [1, 3], "dtype": "float32"}},
    "variant": {"precision": "fp32"},
}
SERVING_STORED = {
    "run_id": 1, "simulated": 1, "traffic": "{}", "batching": "{}", "cache": "{}",
    "warmup_s": 0.5, "origin_ns": 11, "calibration": None, "summary": None, "answers": None,
}  # fmt: skip
SERVING_READ = SERVING_STORED | {"simulated": True, "traffic": {}, "batching": {}, "cache": {},
                                 "answers": {}}  # fmt: skip

# (spec, the row as stored, by column, the record read back)
CASES: list[tuple[RecordSpec[Any], dict[str, Any], object]] = [
    (
        MODELS,
        {
            "sha256": "abc",
            "name": "a",
            "path": "/m/a.onnx",
            "file_bytes": 10,
            "inputs": '[{"name": "x"}]',
            "outputs": "[]",
            "info": '{"ops": 3}',
            "first_seen": "2026-01-01T00:00:00Z",
        },
        ModelRow(
            "abc", "a", "/m/a.onnx", 10, [{"name": "x"}], [], {"ops": 3}, "2026-01-01T00:00:00Z"
        ),
    ),
    (RUNS, RUN_STORED, RUN_READ),
    (
        LATENCY,
        {"run_id": 1, "i": 0, "start_ns": 5, "latency_ns": 900},
        {"run_id": 1, "i": 0, "start_ns": 5, "latency_ns": 900},
    ),
    (
        PROFILES,
        {
            "run_id": 1,
            "pass": 0,
            "runs": 5,
            "coverage": 0.9,
            "overhead": 0.1,
            "provider_nodes": '{"CPUExecutionProvider": 3}',
            "nodes_total": 3,
            "recorded_at": "2026-01-01T00:00:00Z",
            "contention": '{"verdict": "quiet"}',
        },
        ProfileRow(
            1,
            0,
            5,
            0.9,
            0.1,
            {"CPUExecutionProvider": 3},
            3,
            "2026-01-01T00:00:00Z",
            {"verdict": "quiet"},
        ),
    ),
    (
        PROFILE_RUNS,
        {"run_id": 1, "pass": 0, "run_index": 0, "start_us": 1.5, "dur_us": 2.5},
        RunSpan(0, 1.5, 2.5),
    ),
    (
        OPS,
        {
            "run_id": 1,
            "pass": 0,
            "kind": "node",
            "rank": 0,
            "name": "conv1",
            "op_type": "Conv",
            "provider": "CPUExecutionProvider",
            "calls": 1,
            "time_ms": 1.5,
            "p50_ms": 1.25,
            "p99_ms": 2.5,
            "share": 0.5,
            "bytes": 4096,
            "gbps": 2.0,
            "flops": 9000,
            "gflops": 6.0,
            "intensity": 2.2,
        },
        STAT,
    ),
    (
        TELEMETRY,
        {"run_id": 1, "wall_ns": 5, "name": "gpu_clock", "value": 1.5},
        {"run_id": 1, "wall_ns": 5, "name": "gpu_clock", "value": 1.5},
    ),
    (
        MARKERS,
        {"id": 1, "run_id": 1, "wall_ns": 5, "t_ns": 2, "kind": "note", "label": "l", "text": "t"},
        MarkerRow(1, 1, 5, 2, "note", "l", "t"),
    ),
    (SERVING, SERVING_STORED, SERVING_READ),
    (
        REQUESTS,
        {
            "run_id": 1,
            "i": 0,
            "scheduled_ns": 1,
            "sent_ns": 2,
            "dequeued_ns": None,
            "done_ns": 4,
            "batch": 0,
            "hit": 1,
            "outcome": 0,
        },
        {
            "run_id": 1,
            "i": 0,
            "scheduled_ns": 1,
            "sent_ns": 2,
            "dequeued_ns": None,
            "done_ns": 4,
            "batch": 0,
            "hit": 1,
            "outcome": 0,
        },
    ),
    (
        BATCHES,
        {"run_id": 1, "id": 0, "start_ns": 1, "end_ns": 2, "size": 4, "instance": 0},
        {"run_id": 1, "id": 0, "start_ns": 1, "end_ns": 2, "size": 4, "instance": 0},
    ),
    (
        SWEEPS,
        {
            "id": 1,
            "created_at": "c",
            "model_path": "/m",
            "dim": "batch",
            "config": None,
            "result": '{"points": []}',
            "run_ids": "[1, 2]",
            "status": "complete",
        },
        {
            "id": 1,
            "created_at": "c",
            "model_path": "/m",
            "dim": "batch",
            "config": None,
            "result": {"points": []},
            "run_ids": [1, 2],
            "status": "complete",
        },
    ),
    (
        MEMORY,
        {"id": 1, "created_at": "c", "model_path": "/m", "config": None, "report": '{"a": 1}'},
        {"id": 1, "created_at": "c", "model_path": "/m", "config": None, "report": {"a": 1}},
    ),
    (
        LLM_STUDIES,
        {
            "id": 1,
            "created_at": "c",
            "model_path": "/m",
            "kind": "simulate",
            "config": None,
            "plan": '{"seed": 1}',
            "rows": "[]",
            "status": "partial",
        },
        {
            "id": 1,
            "created_at": "c",
            "model_path": "/m",
            "kind": "simulate",
            "config": None,
            "plan": {"seed": 1},
            "rows": [],
            "status": "partial",
        },
    ),
    (
        GENERATION,
        {
            "run_id": 1,
            "prompt_len": 8,
            "new_tokens": 16,
            "batch": 2,
            "sampling": "greedy",
            "context_length": 2048,
            "kv_bytes_per_token": 512,
            "summary": '{"ttft_ms": 3}',
        },
        {
            "run_id": 1,
            "prompt_len": 8,
            "new_tokens": 16,
            "batch": 2,
            "sampling": "greedy",
            "context_length": 2048,
            "kv_bytes_per_token": 512,
            "summary": {"ttft_ms": 3},
        },
    ),
    (
        STEPS,
        {"run_id": 1, "generation": 0, "step": 1, "start_ns": None, "dur_ns": 30},
        {"run_id": 1, "generation": 0, "step": 1, "start_ns": None, "dur_ns": 30},
    ),
]


def _session() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    schema.migrate(Database(conn))
    return conn


def _write(conn: sqlite3.Connection, spec: RecordSpec[Any], stored: dict[str, Any]) -> None:
    if set(stored) == set(spec.names):
        conn.execute(spec.insert(), spec.row(**stored))
    else:  # a record read from a join (a run and its model's name): its own columns
        spec.write(conn, **stored)


def _reversed(spec: RecordSpec[Any]) -> RecordSpec[Any]:
    return spec.reordered(spec.names[::-1])


@pytest.mark.parametrize(("spec", "stored", "expected"), CASES, ids=[c[0].table for c in CASES])
def test_a_record_round_trips_every_field_by_name(
    spec: RecordSpec[Any], stored: dict[str, Any], expected: object
) -> None:
    """Written with its spec's INSERT, read with its reader: every field, by name, whatever
    order either spec lists its columns in."""
    for writer, reader in ((spec, spec), (_reversed(spec), spec), (spec, _reversed(spec))):
        conn = _session()
        _write(conn, writer, stored)
        assert reader.read_all(conn) == [expected]
        conn.close()


def test_a_node_event_round_trips_through_its_two_tables() -> None:
    """What a node is (op_nodes, once per run) and each execution (op_times) read back as
    the NodeEvent written, whatever order the three specs list their columns in."""
    facts = {"name": NODE.name, "parent": NODE.parent, "op_type": NODE.op_type,
             "provider": NODE.provider, "node_index": NODE.node_index,
             "activation_bytes": 12, "parameter_bytes": 96, "output_bytes": 32,
             "input_shapes": '[["float", [1, 3]]]',
             "output_shapes": '[["float", [1, 8]]]'}  # fmt: skip
    times = {"run_id": 1, "pass": 0, "seq": 0, "run_index": 0, "node": 0, "start_us": 1.5,
             "dur_us": 2.5, "self_us": 2.0}  # fmt: skip
    for nodes, execs, events in (
        (OP_NODES, OP_TIMES, OP_EVENTS),
        (_reversed(OP_NODES), _reversed(OP_TIMES), _reversed(OP_EVENTS)),
    ):
        conn = _session()
        conn.execute(nodes.insert(), nodes.row(run_id=1, id=0, **facts))
        conn.execute(execs.insert(), execs.row(**times))
        assert events.read_all(conn) == [NODE]
        conn.close()


def test_bulk_rows_follow_the_spec_not_the_caller() -> None:
    """`rows(**columns)` puts whole columns where the spec's INSERT names them."""
    for spec in (LATENCY, _reversed(LATENCY)):
        conn = _session()
        rows = spec.rows(run_id=repeat(1), i=range(3), start_ns=[0, 5, 9], latency_ns=[4, 3, 2])
        conn.executemany(spec.insert(), rows)
        got = conn.execute(LATENCY.select(order="ORDER BY i")).fetchall()
        assert got == [(1, 0, 0, 4), (1, 1, 5, 3), (1, 2, 9, 2)]
        conn.close()


def test_a_spec_refuses_a_column_it_does_not_declare() -> None:
    with pytest.raises(KeyError, match="latency"):
        LATENCY.row(run_id=1, i=0, start_ns=0)  # latency_ns missing
    with pytest.raises(KeyError, match="runs has no column 'nope'"):
        RUNS.update(_session(), {"id": 1}, nope=1)


@pytest.mark.parametrize("spec", SPECS, ids=[s.table for s in SPECS])
def test_every_spec_column_is_in_the_migrated_schema_and_declared(spec: RecordSpec[Any]) -> None:
    """The migrations are explicit (not generated from the specs): each spec's columns
    exist in the schema they build, and each is declared with its bounds."""
    conn = _session()
    for c in spec.columns:
        table, name = c.what.split(".") if c.what else (spec.table, c.name)
        have = {info[1] for info in conn.execute(f"PRAGMA table_info({table})")}
        assert name in have, f"{table}.{name}"
        assert columns.column(f"{table}.{name}") is not None, f"{table}.{name} undeclared"
    conn.close()


def test_no_session_reader_reads_a_row_by_position() -> None:
    positional = re.compile(r"\b(r|row|rows|found)\[\d+\]")
    session = Path(__file__).parent.parent / "engine" / "session"
    hits = [
        f"{p.name}:{i}: {line.strip()}"
        for p in sorted(session.glob("*.py"))
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if positional.search(line)
    ]
    assert hits == []
