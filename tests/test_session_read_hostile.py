"""Session files a probe handed to the readers: a -wal or -shm that is not a file, NaN
literals in a memory report. Each is one line naming the file, never a traceback and
never taken silently."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from engine.errors import SessionFileError
from engine.session.reader import SessionReader
from engine.session.store import SessionStore
from tests.conftest import DEMO_CNN


def memory_report() -> dict[str, Any]:
    """A memory report as engine/run/memory_job.py writes it (its fields the reader reads)."""
    live = {
        "peak_bytes": 1097736.0,
        "at_node": "node_relu",
        "unknown_tensors": 0,
        "alive_at_peak": [{"tensor": "conv2d", "bytes": 524288.0, "producer": "node_Conv"}],
        "timeline": [{"node": "node_Conv", "bytes": 573448.0}],
    }
    return {
        "model": "demo_cnn.onnx",
        "config": {"precision": "fp32", "batch": 1, "threads": 2},
        "provider_used": "CPUExecutionProvider",
        "inputs": {"image": [1, 3, 64, 64]},
        "weights_bytes": {
            "total": 1269704.0,
            "by_dtype": {"float32": 1269672.0, "int64": 32.0},
            "as_loaded": {"float32": 1269672.0},
        },
        "activations": {"as_loaded": live, "as_run": None},
        "measured": {
            "rss_bytes": {"before_session": 60223488, "steady": 76726272},
            "held_bytes": 16502784,
            "estimate_bytes": 2105304.0,
            "estimate_over_measured": 0.127,
            "device": None,
        },
        "load": {"read_s": 0.14, "session_s": 0.21, "variant_cached": True},
    }


def session_with_memory(path: Path) -> Path:
    with SessionStore.create_or_open(path) as store:
        store.add_memory(model_path=str(DEMO_CNN), config={}, report=memory_report())
    return path


def wal_mode(path: Path) -> Path:
    """The file in WAL mode, as a writer leaves it (its header says WAL)."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.close()
    for side in ("-wal", "-shm"):
        Path(f"{path}{side}").unlink(missing_ok=True)
    return path


@pytest.mark.parametrize("side", ["-wal", "-shm"])
@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_wal_or_shm_that_is_not_a_file_is_one_line(tmp_path: Path, side: str, kind: str) -> None:
    """A -wal folder ended in IsADirectoryError from the private copy (a FIFO would block)."""
    session = wal_mode(session_with_memory(tmp_path / "s.opscope"))
    other = Path(f"{session}{side}")
    if kind == "folder":
        other.mkdir()
        (other / "x").write_bytes(b"x")
    else:
        os.mkfifo(other)
    with pytest.raises(SessionFileError) as err:
        SessionReader.open(session).close()
    line = str(err.value)
    assert "\n" not in line and str(session) in line and f"s.opscope{side}" in line, line
    assert ("a folder" if kind == "folder" else "not a regular file") in line


@pytest.mark.parametrize(
    "path",
    [
        ("measured", "held_bytes"),
        ("config", "batch"),  # a field no renderer reads: still an edited report
        ("measured", "device"),
        ("load", "variant_cached"),  # bool(NaN) read as "cached"
        ("activations", "as_loaded", "timeline", 0, "bytes"),
    ],
)
@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_literals_in_a_memory_report_are_refused(
    tmp_path: Path, path: tuple[Any, ...], literal: str
) -> None:
    session = session_with_memory(tmp_path / "m.opscope")
    report = memory_report()
    node = report
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = "@@"
    text = json.dumps(report).replace('"@@"', literal)
    conn = sqlite3.connect(session)
    with conn:
        conn.execute("UPDATE memory SET report = ?", (text,))
    conn.close()
    with SessionReader.open(session) as reader, pytest.raises(SessionFileError) as err:
        reader.memory()
    line = str(err.value)
    assert "\n" not in line and str(session) in line and "memory report 1" in line, line


def test_a_number_is_not_taken_as_variant_cached(tmp_path: Path) -> None:
    session = session_with_memory(tmp_path / "m.opscope")
    report = memory_report()
    report["load"]["variant_cached"] = 1
    conn = sqlite3.connect(session)
    with conn:
        conn.execute("UPDATE memory SET report = ?", (json.dumps(report),))
    conn.close()
    with SessionReader.open(session) as reader, pytest.raises(SessionFileError, match="cached"):
        reader.memory()


def test_the_report_as_written_reads_back(tmp_path: Path) -> None:
    with SessionReader.open(session_with_memory(tmp_path / "m.opscope")) as reader:
        (row,) = reader.memory()
    assert row.report["inputs"] == {"image": [1, 3, 64, 64]}
    assert row.report["load"]["variant_cached"] is True


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.recorded_sessions import QUICK, record

    path = tmp_path_factory.mktemp("ops") / "profiled.opscope"
    record(path, ["profile", DEMO_CNN, *QUICK, "--runs", "5"])
    return path


def without(src: Path, dst: Path, table: str, column: str) -> Path:
    dst.write_bytes(src.read_bytes())
    conn = sqlite3.connect(dst)
    conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    conn.commit()
    conn.close()
    return dst


@pytest.mark.parametrize("column", ["p50_ms", "p99_ms", "share"])
def test_a_missing_optional_ops_column_shows_as_dash(
    profiled: Path, tmp_path: Path, column: str
) -> None:
    """`report` said a missing ops column would show as "-", then refused the file."""
    from tests.recorded_sessions import opscope

    session = without(profiled, tmp_path / "s.opscope", "ops", column)
    out = tmp_path / "s.html"
    proc = opscope("report", session, "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert f"lacks column ops.{column}" in proc.stderr and "show as -" in proc.stderr
    with SessionReader.open(session) as reader:
        ops = reader.ops(1)
    assert ops and all(getattr(o, column) != getattr(o, column) for o in ops)  # NaN: "-"
    if column == "share":
        assert '<td class="r">-</td>' in out.read_text()


def test_a_writer_names_a_wal_folder(tmp_path: Path) -> None:
    """Appending to such a file said only "cannot open (unable to open database file)"."""
    session = wal_mode(session_with_memory(tmp_path / "s.opscope"))
    Path(f"{session}-wal").mkdir()
    with pytest.raises(SessionFileError, match=r"s\.opscope-wal is a folder"):
        SessionStore.create_or_open(session).close()
