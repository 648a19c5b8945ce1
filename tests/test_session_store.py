"""The session file: a real recorded run read back field by field, the event stream of the
live engine, commits during a run, appending, a writer fed from another thread. Files that
must be refused, migrations and read-only folders: tests/test_session_files.py."""

from __future__ import annotations

import dataclasses
import threading
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

import engine
from engine.cli.results import RunResult
from engine.config import RunConfig
from engine.errors import SessionFileError
from engine.events import (
    CommandFailed,
    Notice,
    RunEnded,
    Telemetry,
)
from engine.measure.op_stats import node_stats, op_type_stats
from engine.model.info import ModelInfo, load_model
from engine.session import (
    SCHEMA_VERSION,
    Recorder,
    SessionStore,
    open_session_file,
    recording,
)
from tests.conftest import DEMO_CNN
from tests.session_material import live_events, record_demo_profile


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunResult]:
    path = tmp_path_factory.mktemp("session") / "run.opscope"
    return path, record_demo_profile(path)


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
        assert reader.ops(run.id) == prof.ops
        assert reader.ops(run.id, "op_type") == prof.op_types
        (summary,) = reader.profiles(run.id)
        keys = ("runs", "coverage", "provider_nodes", "nodes_total")
        assert {k: getattr(summary, k) for k in keys} == {k: expected["profile"][k] for k in keys}
        assert summary.overhead == prof.profile_overhead
        trace = reader.profile_trace(run.id)
        assert trace == prof.trace  # every raw per-inference node row
        assert node_stats(trace) == prof.ops and op_type_stats(trace) == prof.op_types
        events = reader.op_events(run.id)
        assert events == list(prof.trace.nodes)

        notices = [(m.label, m.text) for m in reader.markers(run.id) if m.kind == "notice"]
        assert notices == [(n.level, n.message) for n in result.notices]
        (model,) = reader.models()
        assert model.info == result.model.info.to_json()
        assert model.inputs == [v.to_json() for v in result.model.info.inputs]

        meta = reader.meta()
        assert meta["schema_version"] == str(SCHEMA_VERSION)
        assert meta["format"] == "opscope-session" and meta["created_at"]
        assert meta["app_version"] == engine.__version__ and meta["onnxruntime"]
        assert {"host", "os", "cpu", "gpu", "gpu_driver", "python"} <= set(meta)


def test_a_live_stream_of_runs(tmp_path: Path, info: ModelInfo) -> None:
    """Two runs in one stream (the live engine), telemetry, markers, accuracy, a failure."""
    path = tmp_path / "live.opscope"
    e = live_events(info)
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
    e = live_events(info)
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
    e = live_events(info)
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


def test_a_library_error_after_an_interrupt_is_recorded_as_cancelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl+C while ONNX Runtime initializes a session: it raises its own error
    ("initialization failed"); the run the user interrupted reads cancelled, not error."""
    from engine import interrupt

    monkeypatch.setattr(interrupt, "received", threading.Event())
    path = tmp_path / "ctrl-c.opscope"
    interrupt.received.set()
    with (
        pytest.raises(RuntimeError),
        recording(path, model_path="m.onnx", config=RunConfig()) as record,
    ):
        record(Notice("info", "opening"))
        raise RuntimeError("initialization failed")
    with open_session_file(path) as reader:
        (run,) = reader.runs()
        assert (run.status, run.error) == ("cancelled", "interrupted (Ctrl-C)")


def test_appending_runs_to_an_existing_file(tmp_path: Path, info: ModelInfo) -> None:
    path = tmp_path / "append.opscope"
    for batch in (1, 2):
        e = live_events(info, batch)
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


def test_a_store_can_be_fed_from_another_thread(tmp_path: Path, info: ModelInfo) -> None:
    """The GUI creates the store and feeds it from its engine-reader thread."""
    import threading

    e = live_events(info)
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


def test_another_machines_facts_are_kept_once_and_read_back(tmp_path: Path) -> None:
    """An engine host's facts come with its first run (RunStarted.machine): kept as meta
    `machine:NAME`, out of `meta()`, read back by `machines()`; none for the session's
    own machine; a merged session's machine is noted the same way."""
    from engine.session.env import FACTS, host_facts
    from engine.session.merge import copy_runs

    assert tuple(host_facts()) == FACTS  # what a merge copies is what a host records
    box = {**host_facts(), "host": "gpu-box", "gpu": "NVIDIA H200", "cpu_count": "16"}
    path = tmp_path / "s.opscope"
    with SessionStore.create_or_open(path) as store:
        own = str(store.db.execute("SELECT value FROM meta WHERE key = 'host'").fetchone()[0])
        store.note_machine(own, host_facts())  # the session's own: nothing to add
        store.note_machine("gpu-box", box)
    with open_session_file(path) as reader:
        assert reader.machines() == {"gpu-box": {k: v for k, v in box.items() if v}}
        assert not any(k.startswith("machine:") for k in reader.meta())
    other = tmp_path / "host.opscope"
    with SessionStore.create_or_open(other) as store:
        store.db.execute("UPDATE meta SET value = 'tpu-box' WHERE key = 'host'")
        store.start_run({"kind": "bench", "model_path": "m.onnx", "host": "tpu-box"})
    with SessionStore.create_or_open(path) as store:
        copy_runs(store, other)
    with open_session_file(path) as reader:
        assert set(reader.machines()) == {"gpu-box", "tpu-box"}
        assert reader.machines()["tpu-box"]["host"] == "tpu-box"
