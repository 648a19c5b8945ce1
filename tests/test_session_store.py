"""The session file: a real recorded run read back field by field, the event stream of the
live engine, commits during a run, migrations, and files that must be refused."""

from __future__ import annotations

import dataclasses
import shutil
import sqlite3
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlite_utils import Database

import engine
from engine.config import RunConfig
from engine.errors import SessionFileError
from engine.events import (
    AccuracyResult,
    CommandFailed,
    LatencyBatch,
    Marker,
    ModelLoaded,
    Notice,
    RunEnded,
    RunStarted,
    Telemetry,
    TimingDone,
    VariantReady,
)
from engine.model_info import ModelInfo, load_model
from engine.op_stats import node_stats, op_type_stats, stat_to_json
from engine.results import RunResult
from engine.runner import BenchRequest, run_bench
from engine.session import (
    SCHEMA_VERSION,
    Recorder,
    SessionStore,
    open_session_file,
    recording,
    resolve_run_ref,
    schema,
)
from engine.session import reader as reader_mod
from engine.stats import is_stable, latency_stats, throughput
from engine.timing import TimingPlan
from tests.conftest import DEMO_CNN

SHORT = TimingPlan(warmup_runs=2, warmup_s=0.0, min_runs=5, duration_s=0.3)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunResult]:
    """A real profile run of the demo CNN, recorded and folded into a RunResult."""
    path = tmp_path_factory.mktemp("session") / "run.opscope"
    result = RunResult()
    req = BenchRequest(str(DEMO_CNN), timing=SHORT, profile=True, profile_runs=5)
    with SessionStore.create_or_open(path) as store:
        rec = Recorder(store, model_path=str(DEMO_CNN), kind="profile", config=req.config)
        for ev in run_bench(req):
            result.feed(ev)
            rec.feed(ev)
        rec.close()
    return path, result


@pytest.fixture(scope="module")
def info() -> ModelInfo:
    return load_model(DEMO_CNN)[1]


def _iso_ns(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1e9)


def test_a_real_run_round_trips(recorded: tuple[Path, RunResult]) -> None:
    path, result = recorded
    assert result.started and result.timing and result.profile and result.model
    expected = result.to_json()
    with open_session_file(path) as reader:
        (run,) = reader.runs()
        got = run.to_json()
        for key in (
            "config",
            "provider_requested",
            "provider_used",
            "providers",
            "inputs",
            "batch",
            "latency_ms",
            "throughput",
            "stable",
            "warmup_runs",
            "accuracy",
            "status",
        ):
            assert got[key] == expected[key], key
        assert run.kind == "profile" and run.error is None
        assert run.config == result.started.config
        assert run.session_create_s == result.started.session_create_s
        assert run.latency == result.timing.latency
        assert run.throughput == result.timing.throughput
        assert run.elapsed_s == result.timing.elapsed_s
        assert run.variant is not None and result.variant is not None
        assert run.variant | expected["variant"] == run.variant  # build_s stored unrounded
        assert run.variant["build_s"] == result.variant.build_s
        assert run.model_sha256 == result.model.info.sha256
        assert run.model_name == "demo_cnn.onnx" and run.model_path == str(DEMO_CNN)
        assert run.host and run.app_version == engine.__version__

        starts, lats = reader.latency(run.id)
        assert np.array_equal(starts, result.starts_ns)
        assert np.array_equal(lats, result.latencies_ns)
        assert run.samples == lats.size == result.timing.latency.count
        assert run.started_at and run.ended_at and run.timing_origin_ns
        assert _iso_ns(run.started_at) - 10**6 <= run.timing_origin_ns
        assert run.timing_origin_ns + int(starts[-1]) <= _iso_ns(run.ended_at) + 10**6

        prof = result.profile
        assert reader.ops(run.id) == [stat_to_json(s) for s in prof.ops]
        assert reader.ops(run.id, "op_type") == [stat_to_json(s) for s in prof.op_types]
        (summary,) = reader.profiles(run.id)
        assert {k: summary[k] for k in ("runs", "coverage", "provider_nodes", "nodes_total")} == {
            k: expected["profile"][k] for k in ("runs", "coverage", "provider_nodes", "nodes_total")
        }
        assert summary["overhead"] == prof.profile_overhead
        trace = reader.profile_trace(run.id)
        assert trace == prof.trace  # every raw per-inference node row
        assert node_stats(trace) == prof.ops and op_type_stats(trace) == prof.op_types
        events = reader.op_events(run.id)
        assert len(events) == len(prof.trace.nodes)
        assert all(
            e["bytes"] == e["activation_bytes"] + e["parameter_bytes"] + e["output_bytes"]
            for e in events
        )

        notices = [(m.label, m.text) for m in reader.markers(run.id) if m.kind == "notice"]
        assert notices == [(n.level, n.message) for n in result.notices]
        (model,) = reader.models()
        assert model["info"] == result.model.info.to_json()
        assert model["inputs"] == [v.to_json() for v in result.model.info.inputs]

        meta = reader.meta()
        assert meta["schema_version"] == str(SCHEMA_VERSION)
        assert meta["format"] == "opscope-session" and meta["created_at"]
        assert meta["app_version"] == engine.__version__ and meta["onnxruntime"]
        assert {"host", "os", "cpu", "gpu", "gpu_driver", "python"} <= set(meta)


def _events(info: ModelInfo, batch: int = 2) -> dict[str, Any]:
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


def test_a_live_stream_of_runs(tmp_path: Path, info: ModelInfo) -> None:
    """Two runs in one stream (the live engine), telemetry, markers, accuracy, a failure."""
    path = tmp_path / "live.opscope"
    e = _events(info)
    with SessionStore.create_or_open(path) as store:
        rec = Recorder(store)
        for ev in (
            e["loaded"],
            e["variant"],
            Notice("warning", "calibrated on noise"),
            e["started"],
            e["accuracy"],
            e["marker"],
            *e["batches"],
            *e["telemetry"],
            e["done"],
            RunEnded("ok"),
        ):
            rec.feed(ev)
        rec.cancel()  # the run already ended: nothing to mark, no new run
        rec.feed(Telemetry(e["origin"] + 300_000_000, {"cpu_percent": 10.0}))  # between runs
        rec.feed_many(
            [e["loaded"], e["started"], e["batches"][0], CommandFailed("apply", "bad config")]
        )
        rec.fail("engine host died: killed by signal 9")
        rec.close()
    with open_session_file(path) as reader:
        first, second = reader.runs()
        assert first.status == "ok" and first.kind == "bench"
        assert first.accuracy == e["accuracy"]
        assert first.variant == {
            "precision": "int8-dynamic",
            "path": "/cache/model.onnx",
            "build_s": 1.5,
            "cached": False,
            "nodes": 12,
            "nodes_original": 20,
            "details": {"params": {"per_channel": False}},
        }
        assert first.latency == e["done"].latency and first.samples == 5
        assert first.model_path == info.path
        tel = reader.telemetry(first.id)
        assert set(tel) == {"cpu_percent", "rss_mb"}
        times, values = tel["cpu_percent"]
        assert values.tolist() == [50.0, 75.0]
        assert int(times[1] - times[0]) == 100_000_000
        assert int(times[0]) - first.timing_origin_ns == 100_000_000  # one clock for all
        assert reader.telemetry(None)["cpu_percent"][1].tolist() == [10.0]
        marks = {m.kind: m for m in reader.markers(first.id)}
        assert marks["config"].label == "INT8 dynamic"
        assert marks["config"].t_ns == -5_000_000  # backfilled once the origin was known
        assert marks["notice"].text == "calibrated on noise"

        assert second.status == "error" and second.error == "engine host died: killed by signal 9"
        assert second.samples == 3 and reader.latency(second.id)[1].tolist() == [
            1_000_000,
            1_200_000,
            900_000,
        ]
        assert second.latency is None and second.accuracy is None
        (failed,) = [m for m in reader.markers(second.id) if m.kind == "command_failed"]
        assert (failed.label, failed.text) == ("apply", "bad config")


def test_samples_are_committed_while_the_run_streams(tmp_path: Path, info: ModelInfo) -> None:
    """Committed within FLUSH_INTERVAL_S of arriving: a reader in another connection sees
    them, with no close (a kill -9 keeps them)."""
    now = [0.0]
    path = tmp_path / "flush.opscope"
    e = _events(info)
    store = SessionStore.create_or_open(path)
    rec = Recorder(store, clock=lambda: now[0])
    rec.feed(e["started"])
    rec.feed(e["batches"][0])

    def committed() -> tuple[str, int]:
        with open_session_file(path) as reader:
            (run,) = reader.runs()
            return run.status, reader.latency(run.id)[1].size

    assert committed() == ("running", 0)  # buffered
    now[0] = 0.45
    rec.feed(e["batches"][1])
    assert committed() == ("running", 5)
    rec.feed(RunEnded("ok"))
    assert committed() == ("ok", 5)
    store.close()


def test_a_recorder_started_mid_run_begins_with_the_next_run(
    tmp_path: Path, info: ModelInfo
) -> None:
    e = _events(info)
    path = tmp_path / "late.opscope"
    with SessionStore.create_or_open(path) as store:
        rec = Recorder(store)
        rec.feed_many([e["batches"][1], e["accuracy"], e["done"], RunEnded("ok")])
        assert not rec.active and rec.run_id is None
        rec.feed_many([e["loaded"], e["started"], *e["batches"], e["done"], RunEnded("ok")])
        rec.close()
    with open_session_file(path) as reader:
        (run,) = reader.runs()
        assert (run.status, run.samples, run.accuracy) == ("ok", 5, None)


def test_failure_before_the_run_started_is_recorded(tmp_path: Path) -> None:
    path = tmp_path / "early.opscope"
    with (
        pytest.raises(KeyboardInterrupt),
        recording(path, model_path="m.onnx", config=RunConfig(batch=4)) as record,
    ):
        record(Notice("info", "building"))
        raise KeyboardInterrupt
    with open_session_file(path) as reader:
        (run,) = reader.runs()
        assert (run.status, run.error) == ("cancelled", "interrupted (Ctrl-C)")
        assert run.config == RunConfig(batch=4) and run.model_name == "m.onnx"
        assert [m.text for m in reader.markers(run.id)] == ["building"]


def test_appending_runs_to_an_existing_file(tmp_path: Path, info: ModelInfo) -> None:
    path = tmp_path / "append.opscope"
    for batch in (1, 2):
        e = _events(info, batch)
        with recording(path, model_path=info.path) as record:
            for ev in (e["loaded"], e["started"], *e["batches"], e["done"], RunEnded("ok")):
                record(ev)
    with open_session_file(path) as reader:
        runs = reader.runs()
        assert [(r.id, r.batch, r.status, r.samples) for r in runs] == [
            (1, 1, "ok", 5),
            (2, 2, "ok", 5),
        ]
        assert len(reader.models()) == 1 and reader.last_run_id() == 2
        assert reader.latency(2)[1].size == 5
        with pytest.raises(SessionFileError, match="no run 7 \\(runs 1-2\\)"):
            reader.run(7)


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


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_bad_files_are_refused_in_one_line(
    kind: str, tmp_path: Path, recorded: tuple[Path, RunResult]
) -> None:
    path, fragment = bad_file(kind, tmp_path, recorded[0])
    with pytest.raises(SessionFileError) as err:
        open_session_file(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}: ")
    assert fragment in message.removeprefix(f"{path}: ")


@pytest.mark.parametrize("kind", ["corrupt", "truncated", "foreign", "foreign-meta", "future"])
def test_the_writer_never_touches_a_file_it_does_not_own(
    kind: str, tmp_path: Path, recorded: tuple[Path, RunResult]
) -> None:
    path, fragment = bad_file(kind, tmp_path, recorded[0])
    before = path.read_bytes()
    with pytest.raises(SessionFileError) as err:
        SessionStore.create_or_open(path)
    assert fragment in str(err.value).removeprefix(f"{path}: ")
    assert path.read_bytes() == before
    assert not Path(f"{path}-wal").exists()


@pytest.mark.parametrize(
    ("column", "value", "fragment"),
    [
        ("config", '{"batch": -1}', "invalid config"),
        ("config", "not json", "runs.config is not valid JSON"),
        ("config", "[1, 2]", "runs.config is not a JSON dict"),
        ("samples", "many", "runs.samples is not a number"),
        ("accuracy", '{"baseline": "fp32", "cosine": "1; rm -rf"}', "accuracy.cosine"),
        ("inputs", '{"x": {"shape": "1x3", "dtype": "f"}}', "malformed input"),
    ],
)
def test_values_from_the_file_are_validated(
    tmp_path: Path, recorded: tuple[Path, RunResult], column: str, value: str, fragment: str
) -> None:
    path = tmp_path / "tampered.opscope"
    shutil.copyfile(recorded[0], path)
    conn = sqlite3.connect(path)
    conn.execute(f"UPDATE runs SET {column} = ?", [value])
    conn.commit()
    conn.close()
    with open_session_file(path) as reader, pytest.raises(SessionFileError) as err:
        reader.runs()
    assert fragment in str(err.value) and str(path) in str(err.value)


def test_migrations_run_in_order_on_an_empty_database() -> None:
    db = Database(memory=True)
    assert schema.migrate(db) == SCHEMA_VERSION == len(schema.MIGRATIONS)
    assert schema.stored_version(db.conn) == SCHEMA_VERSION
    tables = set(db.table_names())
    assert set(schema.REQUIRED_COLUMNS) <= tables
    for table, columns in schema.REQUIRED_COLUMNS.items():
        assert set(columns) <= set(db.table(table).columns_dict), table
    assert schema.migrate(db) == SCHEMA_VERSION  # idempotent


def test_an_older_file_is_migrated(
    tmp_path: Path, recorded: tuple[Path, RunResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a v2 in the list: readers migrate a v1 file in memory, never in place; the
    writer migrates it in place; a failing migration leaves the file at its version."""
    path = tmp_path / "old.opscope"
    shutil.copyfile(recorded[0], path)
    calls: list[int] = []

    def v2_add_tags(db: Database) -> None:
        calls.append(2)
        db.execute("ALTER TABLE runs ADD COLUMN tags TEXT")

    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, v2_add_tags])
    monkeypatch.setattr(schema, "SCHEMA_VERSION", 2)
    before = path.read_bytes()
    with open_session_file(path) as reader:
        assert reader.version == 1 and calls == [2]
        assert reader.runs()[0].status == "ok"
        assert reader._conn.execute("SELECT tags FROM runs").fetchall() == [(None,)]
    assert path.read_bytes() == before

    def v3_broken(db: Database) -> None:
        db.execute("ALTER TABLE runs ADD COLUMN half_done TEXT")
        raise RuntimeError("bug in migration 3")

    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, v3_broken])
    monkeypatch.setattr(schema, "SCHEMA_VERSION", 3)
    with pytest.raises(RuntimeError, match="bug in migration 3"):
        SessionStore.create_or_open(path)
    conn = sqlite3.connect(path)
    assert schema.stored_version(conn) == 2  # v2 committed, v3 rolled back whole
    assert "half_done" not in {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    conn.close()


def _live_copy(tmp_path: Path, info: ModelInfo) -> Path:
    """A session whose writer is still open (data in the -wal), copied elsewhere."""
    src = tmp_path / "live.opscope"
    e = _events(info)
    store = SessionStore.create_or_open(src)
    rec = Recorder(store)
    for ev in (e["started"], *e["batches"]):
        rec.feed(ev)
    rec.flush()
    dst = tmp_path / "copy"
    dst.mkdir()
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{src}{suffix}", dst / f"live.opscope{suffix}")
    store.close()
    return dst / "live.opscope"


@pytest.mark.parametrize("with_wal", [True, False])
def test_read_only_folder_fallbacks(
    tmp_path: Path, info: ModelInfo, with_wal: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When mode=ro cannot open (a WAL file in a read-only folder: no -shm can be made),
    read a private copy of file + -wal, or open immutable when there is no -wal."""
    path = _live_copy(tmp_path, info)
    if not with_wal:
        Path(f"{path}-wal").unlink()
    real_probe = reader_mod._probe
    uris: list[str] = []

    def probe(conn: sqlite3.Connection) -> sqlite3.Connection:
        (uri,) = [row[2] for row in conn.execute("PRAGMA database_list")]
        uris.append(uri)
        if len(uris) == 1:
            conn.close()
            raise sqlite3.OperationalError("unable to open database file")
        return real_probe(conn)

    monkeypatch.setattr(reader_mod, "_probe", probe)
    if with_wal:
        reader = open_session_file(path)
        tmpdir = reader._tmpdir
        assert tmpdir and Path(tmpdir).is_dir()
        assert reader.runs()[0].samples == 5 and reader.latency(1)[1].size == 5
        reader.close()
        assert not Path(tmpdir).exists()
    else:  # the WAL's contents are gone: what the main file holds (nothing yet) is all
        with pytest.raises(SessionFileError, match="copy that too"):
            open_session_file(path)
    assert len(uris) == 2


def test_resolve_run_ref(tmp_path: Path) -> None:
    assert resolve_run_ref("a.opscope") == ("a.opscope", None)
    assert resolve_run_ref("a.opscope:12") == ("a.opscope", 12)
    assert resolve_run_ref("dir:x/a.opscope:3") == ("dir:x/a.opscope", 3)
    assert resolve_run_ref("a.opscope:") == ("a.opscope:", None)
    assert resolve_run_ref("a.opscope:x1") == ("a.opscope:x1", None)
    assert resolve_run_ref("a.opscope:²") == ("a.opscope:²", None)
    assert resolve_run_ref(r"C:\runs\a.opscope") == (r"C:\runs\a.opscope", None)
    assert resolve_run_ref(r"C:\runs\a.opscope:2") == (r"C:\runs\a.opscope", 2)
    assert resolve_run_ref("C:7") == ("C:7", None)  # drive C, not run 7 of a file "C"
    odd = tmp_path / "b.opscope:4"  # an existing file wins
    odd.write_bytes(b"")
    assert resolve_run_ref(str(odd)) == (str(odd), None)


def test_a_store_can_be_fed_from_another_thread(tmp_path: Path, info: ModelInfo) -> None:
    """The GUI creates the store and feeds it from its engine-reader thread."""
    import threading

    e = _events(info)
    store = SessionStore.create_or_open(tmp_path / "t.opscope")
    rec = Recorder(store)
    errors: list[BaseException] = []

    def feed() -> None:
        try:
            rec.feed_many([e["started"], *e["batches"], e["done"], RunEnded("ok")])
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=feed)
    thread.start()
    thread.join()
    store.close()
    assert not errors
    with open_session_file(tmp_path / "t.opscope") as reader:
        assert [r.status for r in reader.runs()] == ["ok"]


def test_marker_and_telemetry_api(tmp_path: Path) -> None:
    with SessionStore.create_or_open(tmp_path / "m.opscope") as store:
        run = store.start_run({"kind": "bench"})
        store.add_marker(run, "config", "INT8 dynamic", "batch 8", t_ns=1_000, wall_ns=5)
        store.add_marker(None, "note", "coffee", "machine busy", wall_ns=6)
        assert (
            store.add_telemetry(run, [(10, "gpu_clock_mhz", 1980.0), (20, "gpu_clock_mhz", 1500)])
            == 2
        )
    with open_session_file(tmp_path / "m.opscope") as reader:
        assert [dataclasses.astuple(m)[1:] for m in reader.markers()] == [
            (run, 5, 1_000, "config", "INT8 dynamic", "batch 8"),
            (None, 6, None, "note", "coffee", "machine busy"),
        ]
        assert len(reader.markers(run)) == 1
        times, values = reader.telemetry(run)["gpu_clock_mhz"]
        assert times.tolist() == [10, 20] and values.tolist() == [1980.0, 1500.0]


def test_gpu_facts_from_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVML names and driver when a GPU answers; null without a driver (no GPU here)."""
    import sys
    import types

    from engine.session.env import gpu_facts

    fake = types.ModuleType("pynvml")
    calls: list[str] = []
    fake.nvmlInit = lambda: calls.append("init")  # type: ignore[attr-defined]
    fake.nvmlShutdown = lambda: calls.append("shutdown")  # type: ignore[attr-defined]
    fake.nvmlDeviceGetCount = lambda: 2  # type: ignore[attr-defined]
    fake.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    fake.nvmlDeviceGetName = lambda h: [b"NVIDIA H200", "NVIDIA H100"][h]  # type: ignore[attr-defined]
    fake.nvmlSystemGetDriverVersion = lambda: "580.65.06"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert gpu_facts() == ("NVIDIA H200; NVIDIA H100", "580.65.06")
    assert calls == ["init", "shutdown"]

    def no_driver() -> None:
        raise OSError("NVML Shared Library Not Found")

    fake.nvmlInit = no_driver  # type: ignore[attr-defined]
    assert gpu_facts() == (None, None)
