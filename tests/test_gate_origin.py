"""Where a gate's candidate runs came from (issues 53/54's leftover): `opscope gate` records
each of its K runs with its origin (`runs.origin`, format v9: `{"job": "gate", "gate": KEY,
"repeat": i}`), so every run list names them "gate 1, repeat 2", as it names a tune's
trials, and not "bench", as if a person had typed them; a second gate into the same file is
"gate 2". The kind stays bench (compare's like-for-like rule), and a stored gate origin
that is not what the writer writes reads as the kind."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from engine.analysis import run_table
from engine.analysis.run_summary import summarize
from engine.cli.main import main
from engine.session import open_session_file
from tests.conftest import DEMO_CNN
from tests.in_process import Cli

QUICK = ("--duration", "0.2", "--warmup", "3", "--threads", "1")


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A baseline of one bench run, and the file a gate of two candidate runs wrote."""
    folder = tmp_path_factory.mktemp("gate_origin")
    base, cand = folder / "base.opscope", folder / "cand.opscope"
    assert main(["bench", str(DEMO_CNN), *QUICK, "--no-accuracy", "--session", str(base)]) == 0
    argv = ["gate", str(base), str(DEMO_CNN), *QUICK, "--runs", "2", "--session", str(cand)]
    # 3 (a regression) or 4 (inconclusive) on a busy machine: the verdict is not this test's
    assert main(argv) in (0, 3, 4)
    return cand


def _origins(path: Path) -> list[tuple[str, str]]:
    with open_session_file(path) as reader:
        return [(r.kind, summarize(r).origin) for r in reader.runs()]


def test_each_candidate_run_says_it_is_the_gates(gated: Path, cli: Cli) -> None:
    assert _origins(gated) == [("bench", "gate 1, repeat 1"), ("bench", "gate 1, repeat 2")]
    with open_session_file(gated) as reader:
        runs = reader.runs()
    came = run_table.COLUMNS[2]
    assert came.name == "from" and came.text(summarize(runs[1])) == "gate 1, repeat 2"
    out = cli("session", "show", gated, "--json", "-")
    assert out.returncode == 0, out.stderr
    shown = [r["origin"] for r in json.loads(out.stdout)["runs"]]
    assert [(o["job"], o["number"], o["repeat"], o["label"]) for o in shown] == [
        ("gate", 1, 1, "gate 1, repeat 1"),
        ("gate", 1, 2, "gate 1, repeat 2"),
    ]


def test_gates_are_numbered_and_a_bare_gate_origin_reads(gated: Path, tmp_path: Path) -> None:
    """Two gates' runs in one file are numbered in the order each first appears; a gate
    origin without its key or repeat (another writer's) is still a gate's."""
    two = tmp_path / "two.opscope"
    shutil.copyfile(gated, two)
    conn = sqlite3.connect(two)
    with conn:
        conn.execute(
            "UPDATE runs SET origin = ? WHERE id = 2", [json.dumps({"job": "gate", "gate": "other",
                                                                    "repeat": 1})]
        )  # fmt: skip
    conn.close()
    assert _origins(two) == [("bench", "gate 1, repeat 1"), ("bench", "gate 2, repeat 1")]
    conn = sqlite3.connect(two)
    with conn:
        conn.execute("UPDATE runs SET origin = ? WHERE id = 1", [json.dumps({"job": "gate"})])
        conn.execute("UPDATE runs SET origin = ? WHERE id = 2",
                     [json.dumps({"job": "gate", "repeat": 3})])  # fmt: skip
    conn.close()
    assert _origins(two) == [("bench", "gate"), ("bench", "gate, repeat 3")]


@pytest.mark.parametrize(
    "stored",
    [
        {"job": "gate", "gate": "k", "repeat": "2"},  # a repeat that is text
        {"job": "gate", "gate": "k", "repeat": 0},
        {"job": "gate", "gate": "k", "repeat": True},
        {"job": "gate", "gate": "\x1b[2Jk", "repeat": 1},
        {"job": "gate", "gate": "k" * 100, "repeat": 1},
        {"job": "gate", "gate": 7, "repeat": 1},
    ],
)
def test_a_gate_origin_that_is_not_a_writers_reads_as_the_kind(
    gated: Path, tmp_path: Path, stored: dict[str, object]
) -> None:
    bad = tmp_path / "bad.opscope"
    shutil.copyfile(gated, bad)
    conn = sqlite3.connect(bad)
    with conn:
        conn.execute("UPDATE runs SET origin = ? WHERE id = 1", [json.dumps(stored)])
    conn.close()
    assert _origins(bad) == [("bench", "bench"), ("bench", "gate 1, repeat 2")]
