"""Session files in trouble (#16): bytes that are not UTF-8 in the schema or in values, a
read-only file or folder, a full disk. Each is one line naming the file and its cause,
exit 2, and the app shows it without a modal dialog and stays up."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from engine.errors import SessionFileError
from engine.session import SessionStore, open_session_file
from tests.recorded_sessions import opscope
from tests.session_material import record_demo_profile

NOT_UTF8 = 0x9E


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("damage") / "run.opscope"
    record_demo_profile(path)
    return path


def schema_not_utf8(source: Path, dest: Path) -> Path:
    """A copy of `source` whose first CREATE TABLE reads CREATE T\\x9eBLE: SQLite's own
    error message then quotes that byte."""
    data = bytearray(source.read_bytes())
    at = data.find(b"CREATE TABLE")
    assert at > 0
    data[at + len("CREATE T")] = NOT_UTF8
    dest.write_bytes(bytes(data))
    return dest


def _one_line(proc: subprocess.CompletedProcess[str], *said: str) -> None:
    err = proc.stderr
    assert proc.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err and all(s in err for s in said), err


def test_a_schema_byte_that_is_not_utf8_is_one_line(tmp_path: Path, recorded: Path) -> None:
    """It was a UnicodeDecodeError traceback (exit 1): Python decodes SQLite's message."""
    bad = schema_not_utf8(recorded, tmp_path / "bad.opscope")
    with pytest.raises(SessionFileError) as err:
        open_session_file(bad)
    assert "T\\x9eBLE" in str(err.value) and "not UTF-8" in str(err.value)
    with pytest.raises(SessionFileError, match=r"corrupt session file .*not UTF-8"):
        SessionStore.create_or_open(bad)  # corrupt, not "not an OpScope session"
    for args in (
        ("session", "show", bad),
        ("compare", bad, recorded),
        ("export", bad, "--csv", tmp_path / "csv"),
        ("report", bad, "-o", tmp_path / "r.html"),
    ):
        _one_line(opscope(*args), str(bad), "corrupt session file", "not UTF-8")


def test_a_value_that_is_not_utf8_is_read_with_a_replacement(
    tmp_path: Path, recorded: Path
) -> None:
    """A model name with a stray byte: the file reads, the byte shown as U+FFFD (it was
    refused as corrupt, the whole session unreadable for one name)."""
    path = tmp_path / "name.opscope"
    shutil.copyfile(recorded, path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE models SET name = CAST(X'6465bc6d6f' AS TEXT)")  # 'de\xbcmo'
    conn.commit()
    conn.close()
    with open_session_file(path) as reader:
        assert reader.runs()[0].model_name == "de\ufffdmo"
        assert reader.models()[0]["name"] == "de\ufffdmo"
    proc = opscope("session", "show", path)
    assert proc.returncode == 0 and "de\ufffdmo" in proc.stdout, proc.stderr


def test_the_app_shows_a_bad_session_in_its_banner(qtbot, tmp_path: Path, recorded: Path) -> None:  # type: ignore[no-untyped-def]
    """Recording into it (--session) or opening it: a banner, never a modal dialog; the app
    records into a new autosave file instead."""
    pytest.importorskip("PySide6")
    from app.workbench import Workbench

    bad = schema_not_utf8(recorded, tmp_path / "bad.opscope")
    wb = Workbench(session_path=str(bad), usable=["cpu"])
    qtbot.addWidget(wb.window)
    try:
        assert wb.recording.path != bad and wb.recording.path.exists()
        assert not wb.window.banner.isHidden()
        text = wb.window.banner.text.text()
        assert "Cannot record into" in text and str(bad) in text and "not UTF-8" in text
        wb.window.banner.hide()
        wb.open_session(str(bad))
        assert not wb.window.banner.isHidden() and not wb.session_windows
        assert "Cannot open session" in wb.window.banner.text.text()
    finally:
        wb.shutdown()


def test_the_app_quits_on_time_with_a_bad_session(tmp_path: Path, recorded: Path) -> None:
    """`opscope gui BAD --session BAD --quit-after 1`: both errors in the banner; a modal
    dialog used to block --quit-after forever (and the schema error crashed the app)."""
    bad = schema_not_utf8(recorded, tmp_path / "bad.opscope")
    shot = tmp_path / "shot.png"
    proc = opscope("gui", bad, "--session", bad, "--quit-after", "1", "--screenshot", shot,
                   timeout=120)  # fmt: skip
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert shot.stat().st_size > 0
