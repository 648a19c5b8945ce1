"""Hostile copies of a real session file against every reader command (#29, #30): each
ends with exit 0 or a one-line error (exit 2), never a traceback, in bounded time and
memory. A sample of tests/session_mutations.py's mutations; bench/session_probe.py runs
them all (bench/results/session_probe.md)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING
from unittest.mock import MagicMock

import pytest

from engine.cli.main import main
from engine.errors import SessionFileError
from engine.session import SessionStore, open_session_file
from tests.built_once import built_once
from tests.session_mutations import (
    Mutation,
    Outcome,
    drop_column,
    generation_without_steps,
    inflate,
    many_sweeps,
    mutated_copy,
    reader_commands,
    record_material,
    run_reader,
    set_json,
    set_value,
    steps_under_load,
    warm_imports,
)

if TYPE_CHECKING:
    from pytestqt.qtbot import QtBot

# A damaged file may cost a little more than the clean one (an error path, a summary
# table), never multiples of it: the old report on 500 sweeps took ~25x the clean report.
CPU_RATIO = 3.0
RSS_RATIO = 2.0
ALL = ("show", "show-json", "compare", "compare-load", "export-trace", "export-csv", "report")
SERVING = ("compare-load", "export-trace", "report", "simulate")

CASES: list[tuple[str, Mutation, tuple[str, ...]]] = [
    ("drop runs.timing_origin_ns", drop_column("runs", "timing_origin_ns"), ALL),
    ("drop runs.stable", drop_column("runs", "stable"), ("show", "compare", "report")),
    ("drop serving.summary", drop_column("serving", "summary"), SERVING),
    ("runs.batch=1e18", set_value("runs", "batch", 10**18), ("show", "report")),
    ("runs.p50_ms=inf", set_value("runs", "p50_ms", 9e999), ("show-json", "compare")),
    ("latency_ns=inf", set_value("latency", "latency_ns", 9e999), ("compare", "export-csv")),
    ("batches.size=-1", set_value("batches", "size", -1), SERVING),
    ("max_batch=1e18", set_json("serving", "batching", ("max_batch",), 10**18), SERVING),
    ("delay_ms='5'", set_json("serving", "batching", ("delay_ms",), "5"), SERVING),
    ("p50=NaN", set_json("serving", "summary", ("latency_ms", "p50"), float("nan")), SERVING),
    ("shapes 5 MB", inflate("op_nodes", "input_shapes"), ("export-trace", "report")),
    ("steps under a load run", steps_under_load, ("export-trace", "report")),
    ("generation without steps", generation_without_steps, ("export-trace", "report")),
    ("500 sweeps", many_sweeps, ("show", "report")),
]


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Recorded once per test run (tests/built_once.py); every test mutates a copy."""
    warm_imports()
    return built_once(tmp_path_factory, "probe-material", lambda f: (record_material(f), {}))[0]


@pytest.fixture(scope="module")
def baseline(material: Path, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    """The clean file's report: the heaviest reader command, the yardstick."""
    work = tmp_path_factory.mktemp("baseline")
    out = run_reader(reader_commands(material, work)["report"], work)
    assert out.rc == 0, out.stderr
    return out


@pytest.mark.parametrize("label,mutate,commands", CASES, ids=[c[0] for c in CASES])
def test_reader_commands_end_cleanly_on_a_damaged_file(
    material: Path,
    baseline: Outcome,
    tmp_path: Path,
    label: str,
    mutate: Mutation,
    commands: tuple[str, ...],
) -> None:
    copy = mutated_copy(material, tmp_path / "damaged.opscope", mutate)
    argvs = reader_commands(copy, tmp_path)
    for name in commands:
        out = run_reader(argvs[name], tmp_path)
        assert out.problem() is None, f"{label} / {name}: {out.problem()}"
        assert out.cpu_s <= CPU_RATIO * baseline.cpu_s, (label, name, out.cpu_s)
        assert out.max_rss_kb <= RSS_RATIO * baseline.max_rss_kb, (label, name, out.max_rss_kb)


def test_a_missing_optional_column_reads_as_none_and_shows_a_dash(
    material: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = mutated_copy(material, tmp_path / "c.opscope", drop_column("runs", "batch"))
    with open_session_file(copy) as reader:
        runs = reader.runs()
        assert [r.batch for r in runs] == [None] * len(runs)
        assert runs[0].latency is not None  # the rest of the row reads as recorded
    capsys.readouterr()
    assert main(["session", "show", f"{copy}:1", "--json", str(tmp_path / "1.json")]) == 0
    assert '"batch": null' in (tmp_path / "1.json").read_text()
    # the "-" has a reason, said once, in one line, whichever command opened the file
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert notes == [
        f"note: {copy}: lacks column runs.batch (written by another version, or edited): "
        "those figures show as -"
    ]


def test_a_fractional_sample_is_refused_not_truncated(material: Path, tmp_path: Path) -> None:
    """A latency of 1.5 ns is no integer a recorder wrote: refused in one line, never read
    as 1 ns (numpy's int64 conversion truncates)."""
    copy = mutated_copy(material, tmp_path / "c.opscope", set_value("latency", "latency_ns", 1.5))
    with open_session_file(copy) as reader, pytest.raises(SessionFileError) as err:
        reader.latency(1)
    assert "latency.latency_ns is not a number within its bounds" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_missing_required_column_is_one_line_naming_file_and_column(
    material: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = mutated_copy(material, tmp_path / "c.opscope", drop_column("runs", "p50_ms"))
    assert main(["session", "show", str(copy)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"opscope: error: {copy}: not an OpScope session this version can read "
        "(runs table lacks column p50_ms)"
    )


def test_values_out_of_bounds_read_as_missing_or_refuse_in_one_line(
    material: Path, tmp_path: Path
) -> None:
    copy = mutated_copy(material, tmp_path / "a.opscope", set_value("runs", "batch", 10**18))
    with open_session_file(copy) as reader:
        assert {r.batch for r in reader.runs()} == {None}  # shown "-"
    copy = mutated_copy(
        material, tmp_path / "b.opscope", set_json("serving", "batching", ("max_batch",), -1)
    )
    with open_session_file(copy) as reader, pytest.raises(SessionFileError) as err:
        reader.serving(2)
    assert "serving.batching.max_batch is out of range" in str(err.value)
    nan = float("nan")  # json.dumps writes the literal NaN, which OpScope never writes
    copy = mutated_copy(
        material, tmp_path / "c.opscope", set_json("serving", "batching", ("delay_ms",), nan)
    )
    with open_session_file(copy) as reader, pytest.raises(SessionFileError) as err:
        reader.serving(2)
    assert "serving.batching.delay_ms is out of range (nan" in str(err.value)
    copy = mutated_copy(
        material,
        tmp_path / "d.opscope",
        set_json("serving", "summary", ("latency_ms", "p50"), nan),
    )
    with open_session_file(copy) as reader:
        serving = reader.serving(2)
    assert serving is not None and serving.summary is not None
    assert serving.summary["latency_ms"]["p50"] is None  # shown "-", never as NaN


def test_a_file_that_cannot_take_a_recording_is_never_written(
    material: Path, tmp_path: Path
) -> None:
    copy = mutated_copy(material, tmp_path / "c.opscope", drop_column("runs", "timing_origin_ns"))
    before = copy.read_bytes()
    with pytest.raises(SessionFileError) as err:
        SessionStore.create_or_open(copy)
    assert "cannot take a recording" in str(err.value)
    assert "runs table lacks column timing_origin_ns" in str(err.value)
    assert "nothing was written" in str(err.value)
    assert copy.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.opscope"]  # no -wal, -shm
    conn = sqlite3.connect(copy)
    assert conn.execute("SELECT COUNT(*) FROM runs WHERE status = 'running'").fetchone() == (0,)
    conn.close()


@pytest.mark.parametrize(
    "mutate,message",
    [
        (drop_column("runs", "timing_origin_ns"), ""),  # no origin: runs one after another
        # an optional column: its figures show as "-" (tests/test_probe_ops_columns.py)
        (drop_column("ops", "calls"), ""),
        (set_value("latency", "latency_ns", 9e999), "corrupt session file"),
    ],
    ids=["no timing origin", "ops without calls", "latency inf"],
)
def test_the_read_only_session_window_reads_a_damaged_file(
    qtbot: QtBot, material: Path, tmp_path: Path, mutate: Mutation, message: str
) -> None:
    """`opscope gui FILE`'s window: every run selected, then all together (a simulated
    run's requests are not in start order); a damaged part is one line in its status bar,
    never an exception out of a slot (pytest-qt fails the test on one)."""
    pytest.importorskip("PySide6")
    from app.host.job_runner import JobRunner
    from app.sessions.session_window import SessionWindow

    window = SessionWindow(
        mutated_copy(material, tmp_path / "c.opscope", mutate), MagicMock(spec=JobRunner)
    )
    qtbot.addWidget(window)
    seen = []
    for row in range(window.table.rowCount()):
        window.table.selectRow(row)
        seen.append(window.statusBar().currentMessage())
    window.table.selectAll()
    seen.append(window.statusBar().currentMessage())
    if message:
        assert any(message in m and "\n" not in m for m in seen), seen
    else:
        assert seen == [""] * len(seen)
        assert window.latency.series.total > 0
    window.close()
