"""Session-file test material shared by the store, file-safety and session CLI tests: a real
recorded profile run of the demo CNN, hand-made events of a live run, and files that must
be refused."""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

import numpy as np

from engine.cli.results import RunResult
from engine.config import RunConfig
from engine.events import (
    AccuracyResult,
    LatencyBatch,
    Marker,
    ModelLoaded,
    RunStarted,
    Telemetry,
    TimingDone,
    VariantReady,
)
from engine.measure.stats import is_stable, latency_stats, throughput
from engine.model.info import ModelInfo
from engine.model.workload import Workload
from engine.run.bench import BenchRequest, run_bench
from engine.run.timing import TimingPlan
from engine.session import SCHEMA_VERSION, Recorder, SessionStore
from tests.conftest import DEMO_CNN

SHORT = TimingPlan(warmup_runs=2, warmup_s=0.0, min_runs=5, duration_s=0.3)


def record_demo_profile(path: Path) -> RunResult:
    """A real profile run of the demo CNN, recorded to `path` and folded into a RunResult."""
    result = RunResult()
    req = BenchRequest(Workload(str(DEMO_CNN)), timing=SHORT, profile=True, profile_runs=5)
    with SessionStore.create_or_open(path) as store:
        rec = Recorder(store, model_path=str(DEMO_CNN), kind="profile", config=req.workload.config)
        for ev in run_bench(req):
            result.feed(ev)
            rec.feed(ev)
        rec.close()
    return result


def live_events(info: ModelInfo, batch: int = 2) -> dict[str, Any]:
    """Hand-made events of a live run: perf_counter stamps, origin, telemetry, markers."""
    origin = time.perf_counter_ns()
    lats = np.array([1_000_000, 1_200_000, 900_000, 1_100_000, 1_050_000], np.int64)
    starts = np.cumsum(lats) - lats[0]
    return {
        "origin": origin,
        "starts": starts,
        "lats": lats,
        "loaded": ModelLoaded(info),
        "variant": VariantReady(
            "int8-dynamic",
            "/cache/model.onnx",
            1.5,
            False,
            20,
            12,
            {"params": {"per_channel": False}},
        ),
        "started": RunStarted(
            RunConfig(precision="int8-dynamic", batch=batch, threads=2),
            "CPUExecutionProvider",
            "CPUExecutionProvider",
            ("CPUExecutionProvider",),
            {"image": ((batch, 3, 64, 64), "float32")},
            batch,
            0.25,
        ),
        "marker": Marker("config", "INT8 dynamic", origin - 5_000_000),
        "batches": [
            LatencyBatch(starts[:3], lats[:3], origin),
            LatencyBatch(starts[3:], lats[3:], origin),
        ],
        "telemetry": [
            Telemetry(origin + 100_000_000, {"cpu_percent": 50.0, "rss_mb": 80.5}),
            Telemetry(origin + 200_000_000, {"cpu_percent": 75.0, "rss_mb": 81.0}),
        ],
        "accuracy": AccuracyResult(
            "fp32", 0.06, 0.014, 0.9978, 1.0, 4, {"logits": {"cosine": 0.9978, "top1": None}}
        ),
        "done": TimingDone(
            latency_stats(lats), throughput(starts, lats, batch), is_stable(lats), 10, 0.01
        ),
    }


def _make_foreign(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO photos (name) VALUES ('cat.jpg')")
    conn.commit()
    conn.close()


def _make_future(path: Path, source: Path) -> None:
    shutil.copyfile(source, path)
    conn = sqlite3.connect(path)
    conn.execute(
        "UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION + 1)]
    )
    conn.commit()
    conn.close()


def bad_file(kind: str, folder: Path, source: Path) -> tuple[Path, str]:
    """A file of `kind` in `folder`, and a fragment its error message must contain."""
    path = folder / f"{kind}.opscope"
    if kind == "corrupt":
        path.write_bytes(np.random.default_rng(0).bytes(64 * 1024))
        return path, "not an SQLite database"
    if kind == "truncated":
        data = source.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        return path, "truncated"
    if kind == "foreign":
        _make_foreign(path)
        return path, "other tables"
    if kind == "foreign-meta":  # a table named meta, of another design
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE meta (version INTEGER)")
        conn.commit()
        conn.close()
        return path, "meta table is not OpScope's"
    if kind == "empty":
        path.write_bytes(b"")
        return path, "empty file"
    if kind == "future":
        _make_future(path, source)
        return path, "please upgrade OpScope"
    if kind == "missing":
        return path, "file not found"
    raise AssertionError(kind)


BAD_KINDS = ["corrupt", "truncated", "foreign", "foreign-meta", "empty", "future", "missing"]


def op_rows_as_v4(conn: sqlite3.Connection) -> None:
    """Turn a current file's compact op rows (op_nodes + op_times, v5) back into the one
    wide `op_events` table of formats 1-4, rows in trace order, and drop the tables later
    formats added (v6: memory reports, v7: LLM serving studies): for tests that fake an
    older file from a freshly recorded one."""
    conn.execute("DROP TABLE IF EXISTS memory")
    conn.execute("DROP TABLE IF EXISTS llm_studies")
    from sqlite_utils import Database

    from engine.session import schema

    old = Database(sqlite3.connect(":memory:"))
    schema.migrate(old, schema.MIGRATIONS[:4])
    query = (
        "SELECT sql FROM sqlite_master WHERE name LIKE '%op_events%' AND sql IS NOT NULL "
        "ORDER BY type DESC"  # the table, then its index
    )
    ddl = [sql for (sql,) in old.execute(query)]
    cols = [c[1] for c in old.execute("PRAGMA table_info(op_events)")]
    old.conn.close()
    conn.execute("DROP VIEW op_events")
    for sql in ddl:
        conn.execute(sql)
    node_cols = set(schema.OP_NODE_COLUMNS)
    picked = ", ".join(
        "n.activation_bytes + n.parameter_bytes + n.output_bytes" if c == "bytes"
        else "COALESCE(t.self_us, t.dur_us)" if c == "self_us"
        else f"n.{c}" if c in node_cols
        else f"t.{c}"
        for c in cols
    )  # fmt: skip
    conn.execute(
        f"INSERT INTO op_events ({', '.join(cols)}) SELECT {picked} FROM op_times t "
        "JOIN op_nodes n ON n.run_id = t.run_id AND n.id = t.node ORDER BY t.run_id, t.pass, t.seq"
    )
    conn.execute("DROP TABLE op_times")
    conn.execute("DROP TABLE op_nodes")
