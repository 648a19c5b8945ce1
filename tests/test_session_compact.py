"""Format v5 stores a profiling pass's per-inference node rows compactly (`op_nodes` once
per run, `op_times` per execution): a v4 file reads the same after migration, the rows
take a fraction of the space, and `opscope session compact` writes a copy to hand on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from sqlite_utils import Database

from engine.cli.main import main as cli
from engine.errors import SessionFileError
from engine.events import OpProfile, RunEnded
from engine.measure.op_stats import coverage, node_stats, op_type_stats
from engine.measure.op_trace import ProfileTrace, parse_ort_profile
from engine.session import SCHEMA_VERSION, SessionStore, open_session_file, schema
from engine.session.compact_copy import compact_copy
from engine.session.trust import json_text

FIXTURES = Path(__file__).parent / "fixtures"
V4_OP_EVENTS = (
    "INSERT INTO op_events (run_id, pass, run_index, name, parent, op_type, provider, "
    "node_index, start_us, dur_us, self_us, bytes, activation_bytes, parameter_bytes, "
    "output_bytes, input_shapes, output_shapes) VALUES "
    "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def traces() -> list[ProfileTrace]:
    """Real ORT profiles: an MLP, and If/Loop subgraphs (parents, self times)."""
    return [
        parse_ort_profile(FIXTURES / f)
        for f in ("ort_profile_mlp.json", "ort_profile_if_loop.json")
    ]


def write_v4(path: Path, passes: list[ProfileTrace]) -> None:
    """A format-v4 file as OpScope v4 wrote it: one run, latency rows, the passes' rows."""
    db = Database(sqlite3.connect(path))
    schema.migrate(db, schema.MIGRATIONS[:4])
    conn = db.conn
    with conn:
        conn.execute("INSERT INTO runs (id, kind, status, samples) VALUES (1, 'live', 'ok', 3)")
        conn.executemany(
            "INSERT INTO latency (run_id, i, start_ns, latency_ns) VALUES (1, ?, ?, ?)",
            [(0, 0, 1000), (1, 1000, 1100), (2, 2100, 900)],
        )
        for p, trace in enumerate(passes):
            conn.execute(
                "INSERT INTO profiles (run_id, pass, runs, provider_nodes) VALUES (1, ?, ?, '{}')",
                [p, len(trace.runs)],
            )
            conn.executemany(
                "INSERT INTO profile_runs VALUES (1, ?, ?, ?, ?)",
                [(p, r.run_index, r.start_us, r.dur_us) for r in trace.runs],
            )
            conn.executemany(
                V4_OP_EVENTS,
                [
                    (
                        1,
                        p,
                        n.run_index,
                        n.name,
                        n.parent,
                        n.op_type,
                        n.provider,
                        n.node_index,
                        n.start_us,
                        n.dur_us,
                        n.self_us,
                        n.activation_bytes + n.parameter_bytes + n.output_bytes,
                        n.activation_bytes,
                        n.parameter_bytes,
                        n.output_bytes,
                        json_text(n.input_shapes),
                        json_text(n.output_shapes),
                    )
                    for n in trace.nodes
                ],
            )
    conn.close()


def table_bytes(path: Path, *tables: str) -> int:
    conn = sqlite3.connect(path)
    owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master"))
    sizes = conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
    conn.close()
    return sum(int(size) for name, size in sizes if owner.get(name) in tables)


def test_a_v4_file_reads_the_same_after_migration(tmp_path: Path) -> None:
    mlp, loops = traces()
    path = tmp_path / "v4.opscope"
    write_v4(path, [mlp, loops, mlp])
    v4_rows = (
        sqlite3.connect(path)
        .execute(
            "SELECT run_id, pass, run_index, name, parent, start_us, dur_us, self_us, bytes, "
            "input_shapes FROM op_events ORDER BY rowid"
        )
        .fetchall()
    )
    with open_session_file(path) as reader:  # migrated in memory, the file untouched
        assert reader.version == 4
        assert [reader.profile_trace(1, p) for p in range(3)] == [mlp, loops, mlp]
    SessionStore.create_or_open(path).close()  # the writer migrates in place
    conn = sqlite3.connect(path)
    assert schema.stored_version(conn) == SCHEMA_VERSION == 9
    view = conn.execute(
        "SELECT run_id, pass, run_index, name, parent, start_us, dur_us, self_us, bytes, "
        "input_shapes FROM op_events ORDER BY run_id, pass, seq"
    ).fetchall()
    assert view == v4_rows  # tools that queried op_events still can
    distinct = {r[3:5] for r in v4_rows}
    (nodes,) = conn.execute("SELECT COUNT(*) FROM op_nodes").fetchone()
    assert nodes == len(distinct)  # once per run, not once per pass or inference
    conn.close()
    with open_session_file(path) as reader:
        assert reader.profile_trace(1, 1) == loops


def test_passes_of_one_run_share_their_nodes(tmp_path: Path) -> None:
    mlp, loops = traces()
    with SessionStore.create_or_open(tmp_path / "s.opscope") as store:
        run = store.start_run({"kind": "live"})
        for trace in (mlp, loops, mlp):
            store.add_profile(
                run,
                OpProfile(
                    node_stats(trace),
                    op_type_stats(trace),
                    coverage(trace),
                    len(trace.runs),
                    {},
                    trace,
                ),
            )
        (nodes,) = store.db.execute("SELECT COUNT(*) FROM op_nodes").fetchone()
        (times,) = store.db.execute("SELECT COUNT(*) FROM op_times").fetchone()
    assert times == 2 * len(mlp.nodes) + len(loops.nodes)
    assert nodes == len({(n.name, n.parent) for n in mlp.nodes + loops.nodes})
    with open_session_file(tmp_path / "s.opscope") as reader:
        assert [reader.profile_trace(run, p) for p in range(3)] == [mlp, loops, mlp]
        events = reader.op_events(run, 1)
        assert [e.self_us for e in events] == [n.self_us for n in loops.nodes]


def test_compact_rows_take_a_fraction_of_the_space(tmp_path: Path) -> None:
    """Live work repeats passes of the same nodes: 40 passes of the MLP profile."""
    mlp, _ = traces()
    path = tmp_path / "v4.opscope"
    write_v4(path, [mlp] * 40)
    before = table_bytes(path, "op_events")
    out = tmp_path / "v5.opscope"
    done = compact_copy(path, out)
    after = table_bytes(out, "op_nodes", "op_times")
    assert after < before / 4
    assert done.copy_bytes < done.source_bytes


def test_compact_cli_keeps_every_sample_and_the_last_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mlp, loops = traces()
    src = tmp_path / "team.opscope"
    write_v4(src, [mlp, loops, mlp])
    out = tmp_path / "compact.opscope"
    assert cli(["session", "compact", str(src), str(out), "--keep-passes", "1"]) == 0
    assert "older op rows dropped" in capsys.readouterr().out
    with open_session_file(src) as a, open_session_file(out) as b:
        assert b.version == SCHEMA_VERSION
        assert all(np.array_equal(x, y) for x, y in zip(a.latency(1), b.latency(1), strict=True))
        assert len(b.profiles(1)) == 3  # every pass's summary stays
        assert b.op_events(1, 0) == b.op_events(1, 1) == []
        assert b.profile_trace(1, 2) == mlp
        assert "last 1" in (b.meta()["op_rows_kept"] or "")
    assert schema.stored_version(sqlite3.connect(src)) == 4  # the source is only read

    assert cli(["session", "compact", str(src), str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "compact.opscope" in err and "already exists" in err
    (tmp_path / "junk.opscope").write_text("not a session")
    assert cli(["session", "compact", str(tmp_path / "junk.opscope"), str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "junk.opscope" in err
    assert not (tmp_path / "x").exists()


def test_runs_copied_into_another_session_keep_their_op_rows(tmp_path: Path) -> None:
    """A Ray trial's session merged into the user's: op_nodes and op_times follow their run."""
    from engine.session.merge import copy_runs

    mlp, loops = traces()
    src, dst = tmp_path / "node.opscope", tmp_path / "mine.opscope"
    for path, trace in ((src, mlp), (dst, loops)):
        with SessionStore.create_or_open(path) as store:
            run = store.start_run({"kind": "profile"})
            store.add_profile(run, OpProfile([], [], 1.0, len(trace.runs), {}, trace))
    with SessionStore.create_or_open(dst) as store:
        assert copy_runs(store, src) == [2]
    with open_session_file(dst) as reader:
        assert reader.profile_trace(1) == loops and reader.profile_trace(2) == mlp


def test_the_app_saves_a_compact_copy_while_recording_goes_on(tmp_path: Path) -> None:
    """File > Save Compact Copy: the recording's file so far, older passes' raw rows
    dropped; the recording keeps writing its own file."""
    from app.sessions.recording import Recording
    from engine.model.info import load_model
    from tests.conftest import DEMO_CNN
    from tests.session_material import live_events

    mlp, loops = traces()
    e = live_events(load_model(DEMO_CNN)[1])
    recording = Recording(tmp_path / "live.opscope")
    profiles = [OpProfile([], [], 1.0, len(t.runs), {}, t) for t in (mlp, loops, mlp)]
    recording.sink([e["loaded"], e["started"], *e["batches"], *profiles])
    out = tmp_path / "handed-on.opscope"
    out.write_text("an older copy the save dialog agreed to replace")
    done = recording.compact_copy(out, keep_passes=1)
    recording.sink([e["done"], RunEnded("ok", None)])
    with pytest.raises(SessionFileError, match="being recorded"):
        recording.compact_copy(tmp_path / "live.opscope", keep_passes=1)
    recording.close()
    assert done.op_rows_dropped == len(mlp.nodes) + len(loops.nodes)
    with open_session_file(out) as copy, open_session_file(tmp_path / "live.opscope") as live:
        (run,) = copy.runs()
        assert copy.latency(run.id)[1].size == 5 and copy.profile_trace(run.id) == mlp
        assert copy.op_events(run.id, 0) == []
        assert live.profile_trace(run.id, 0) == mlp and live.run(run.id).status == "ok"


def test_a_recorded_session_taken_back_to_v4_migrates_to_the_same_trace(tmp_path: Path) -> None:
    """A real profile run of the demo CNN, its op rows rewritten as format v4 had them."""
    from tests.session_material import op_rows_as_v4, record_demo_profile

    path = tmp_path / "run.opscope"
    result = record_demo_profile(path)
    conn = sqlite3.connect(path)
    with conn:
        op_rows_as_v4(conn)
        conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    conn.close()
    with open_session_file(path) as reader:
        assert reader.version == 4
        assert reader.profile_trace(1) == result.profile.trace


def test_a_hosts_session_merged_keeps_sweeps_and_memory_under_local_paths(
    tmp_path: Path,
) -> None:
    """A host's session (a sweep, a memory report, an LLM serving study) merged into the
    window's: the sweep's run ids renumbered, the memory report and the study kept, the
    host's copy of the model named as the file it was sent from."""
    from engine.session.merge import copy_runs
    from tests.sample_reports import LLM_ROW, MEMORY_REPORT

    src, dst = tmp_path / "host.opscope", tmp_path / "mine.opscope"
    there, here = "/host/cache/remote/files/abc/m.onnx", "/work/m.onnx"
    with SessionStore.create_or_open(dst) as store:
        store.start_run({"kind": "live", "model_path": here})
    with SessionStore.create_or_open(src) as store:
        ids = [store.start_run({"kind": "bench", "model_path": there}) for _ in range(2)]
        store.add_sweep(model_path=there, dim="batch", config={}, result={"points": []},
                        run_ids=ids)  # fmt: skip
        report = MEMORY_REPORT
        store.add_memory(model_path=there, config={}, report=report)
        store.add_llm_study(model_path=there, kind="real", config={}, plan={"traffic": "x"},
                            rows=[LLM_ROW], partial=True)  # fmt: skip
    with SessionStore.create_or_open(dst) as store:
        assert copy_runs(store, src, {there: here}) == [2, 3]
    with open_session_file(dst) as reader:
        assert [r.model_path for r in reader.runs()] == [here] * 3
        (sweep,) = reader.sweeps()
        assert list(sweep.run_ids) == [2, 3] and sweep.model_path == here
        (memory,) = reader.memory()
        assert memory.model_path == here and memory.report["weights_bytes"]["total"] == 324_000
        (study,) = reader.llm_studies()
        assert study.model_path == here and study.status == "partial"
        assert study.rows[0]["tokens_identical"] == {"requests": 16, "same": 16}
