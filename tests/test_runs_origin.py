"""Where each run came from (issue 53, "Sharing and runs"): a bench the user typed, two
tunes' trials and a sweep's points recorded in one session file are named so in every run
list and picker (`session show`, its JSON, `compare`, the report's Runs table, the read-only
session window's table and Compare pickers, the Runs dock's file rows), with the file's
one id; the kind stays the measurement's (bench, profile) for `compare`'s like-for-like
rule; a file from before format v9 (or without the column) still reads."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from unittest.mock import MagicMock

import pytest
from pytestqt.qtbot import QtBot

from app.host.job_runner import JobRunner
from app.runs.controller import read_file_runs
from app.sessions.session_window import COLUMNS, SessionWindow
from engine.analysis import run_table
from engine.analysis.report_runs import runs_section
from engine.analysis.run_pick import run_label
from engine.analysis.run_summary import summarize
from engine.cli.main import main
from engine.session import open_session_file
from tests.conftest import DEMO_CNN, DEMO_TRANSFORMER
from tests.in_process import Cli

QUICK = ("--duration", "0.2", "--threads", "1")
# (kind, origin) of each run, in the file's order
WANT = [
    ("bench", "bench"),
    ("bench", "tune 1, trial 1"),
    ("bench", "tune 1, trial 2"),
    ("profile", "sweep 1, sequence=32"),
    ("profile", "sweep 1, sequence=48"),
    ("bench", "tune 2, trial 1"),
]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One file: a bench, a tune of two trials, a sweep of two points, a tune of one."""
    path = tmp_path_factory.mktemp("origin") / "mixed.opscope"
    for argv in (
        ("bench", DEMO_CNN, *QUICK),
        ("tune", DEMO_CNN, "--space", "fusion=basic,all", "--no-recheck", *QUICK),
        ("sweep", DEMO_TRANSFORMER, "--vary", "sequence=32,48", "--runs", "2", *QUICK),
        ("tune", DEMO_CNN, "--space", "fusion=all", "--no-recheck", *QUICK),
    ):
        assert main([*map(str, argv), "--session", str(path)]) == 0, argv
    return path


def test_every_run_says_where_it_came_from_with_its_kind_kept(mixed: Path) -> None:
    with open_session_file(mixed) as reader:
        runs = reader.runs()
        one = reader.run(runs[2].id)  # alone, it is numbered as in the whole file
    got = [(r.kind, summarize(r).origin) for r in runs]
    assert got == WANT
    assert [r.id for r in runs] == list(range(1, len(WANT) + 1))
    assert summarize(one).origin == "tune 1, trial 2"
    # the one label of pickers and lists, with model and inputs
    label = run_label(runs[4])
    assert label.startswith("run 5 · sweep 1, sequence=48 · demo_transformer")
    assert "sequence=48" in label and "1x48" in label
    assert run_label(runs[1]).startswith("run 2 · tune 1, trial 1 · demo_cnn.onnx · ")
    # the runs table (session show, the session window, the report): kind and where from
    kind, came = run_table.COLUMNS[1], run_table.COLUMNS[2]
    assert (kind.name, came.name) == ("kind", "from")
    assert [(kind.text(summarize(r)), came.text(summarize(r))) for r in runs] == WANT


def test_session_show_and_its_json_name_trials_and_points(mixed: Path, cli: Cli) -> None:
    out = cli("session", "show", mixed)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("run "))
    rows = lines[header + 1 : header + 1 + len(WANT)]
    for (run_id, line), (kind, origin) in zip(enumerate(rows, 1), WANT, strict=True):
        assert line.split()[0] == str(run_id)
        assert f" {kind}  " in line and f"  {origin}  " in line, line
    data_path = mixed.parent / "show.json"
    assert cli("session", "show", mixed, "--json", data_path).returncode == 0
    data = json.loads(data_path.read_text())
    got = [(r["kind"], r["origin"]["label"]) for r in data["runs"]]
    assert got == WANT
    assert data["runs"][4]["origin"] == {
        "job": "sweep",
        "number": 1,
        "trial": None,
        "point": "sequence=48",
        "repeat": None,  # a gate's candidate run (tests/test_gate_origin.py)
        "label": "sweep 1, sequence=48",
    }


def test_compare_names_each_side_by_where_it_came_from(mixed: Path, cli: Cli) -> None:
    out = cli("compare", f"{mixed}:2", f"{mixed}:6")
    assert out.returncode in (0, 3, 4), out.stderr  # a verdict, or none on a busy machine
    assert "tune 1, trial 1 (bench) · demo_cnn.onnx" in out.stdout
    assert "tune 2, trial 1 (bench) · demo_cnn.onnx" in out.stdout


def test_the_report_runs_table_names_trials_and_points(mixed: Path) -> None:
    with open_session_file(mixed) as reader:
        html = runs_section(reader.runs())
    for _, origin in WANT:
        assert f">{origin}<" in html
    assert ">from<" in html


def test_the_runs_dock_rows_read_from_the_file_say_where_from(mixed: Path) -> None:
    rows = read_file_runs(str(mixed))
    assert [(r.id, r.kind) for r in rows] == [(i, o) for i, (_, o) in enumerate(WANT, 1)]


def test_the_session_window_table_and_compare_pickers(mixed: Path, qtbot: QtBot) -> None:
    # the window's job runner (exports) is not used here
    window = SessionWindow(mixed, MagicMock(spec=JobRunner))
    qtbot.addWidget(window)
    try:
        t, came = window.table, COLUMNS.index("from")
        shown = [
            tuple(t.model().index(i, c).data() for c in (0, came)) for i in range(t.rowCount())
        ]
        assert shown == [(str(i), o) for i, (_, o) in enumerate(WANT, 1)]
        box = window.compare.baseline
        labels = [box.itemText(i) for i in range(box.count())]
        assert [label.split(" · ")[:2] for label in labels] == [
            [f"run {i}", o] for i, (_, o) in enumerate(WANT, 1)
        ]
    finally:
        window.close()
        window.reader.close()


def test_a_file_from_before_the_column_still_reads(mixed: Path, tmp_path: Path) -> None:
    """Format v8 (no `runs.origin`): its sweep points from the sweeps' run ids, every
    other run as its kind."""
    old = tmp_path / "v8.opscope"
    shutil.copyfile(mixed, old)
    conn = sqlite3.connect(old)
    conn.execute("ALTER TABLE runs DROP COLUMN origin")
    conn.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with open_session_file(old) as reader:
        assert reader.version == 8
        got = [(r.kind, summarize(r).origin) for r in reader.runs()]
    assert got == [
        ("bench", "bench"),
        ("bench", "bench"),
        ("bench", "bench"),
        ("profile", "sweep 1, sequence=32"),
        ("profile", "sweep 1, sequence=48"),
        ("bench", "bench"),
    ]


def test_a_stored_origin_that_is_not_a_writers_reads_as_the_kind(
    mixed: Path, tmp_path: Path, cli: Cli
) -> None:
    """A teammate's file: an origin that is not what OpScope writes (wrong types, control
    characters, too long, not JSON) is no origin; nothing of it reaches a terminal."""
    bad = tmp_path / "bad.opscope"
    shutil.copyfile(mixed, bad)
    conn = sqlite3.connect(bad)
    for run_id, text in (
        (2, json.dumps({"job": "tune", "tune": "k", "trial": "\x1b[31m7"})),
        (3, "{not json"),
        (6, json.dumps({"job": "tune", "tune": "k" * 5000, "trial": 1})),
        (1, json.dumps({"job": "sweep", "dim": "\x1b[2Jseq", "value": "1"})),
    ):
        conn.execute("UPDATE runs SET origin = ? WHERE id = ?", [text, run_id])
    conn.commit()
    conn.close()
    with open_session_file(bad) as reader:
        got = [summarize(r).origin for r in reader.runs()]
    assert got == ["bench", "bench", "bench", "sweep 1, sequence=32", "sweep 1, sequence=48",
                   "bench"]  # fmt: skip
    out = cli("session", "show", bad)
    assert out.returncode == 0 and "\x1b" not in out.stdout
