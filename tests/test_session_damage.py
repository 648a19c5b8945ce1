"""Session files in trouble (#16): bytes that are not UTF-8 in the schema or in values, a
read-only file or folder, a full disk. Each is one line naming the file and its cause,
exit 2, and the app shows it without a modal dialog and stays up."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from unittest.mock import MagicMock

import numpy as np
import pytest

from engine.errors import SessionFileError
from engine.events import LatencyBatch
from engine.model.info import load_model
from engine.session import Recorder, SessionStore, open_session_file
from tests.conftest import DEMO_CNN
from tests.recorded_sessions import opscope
from tests.session_material import live_events, record_demo_profile

if TYPE_CHECKING:
    pass
from tests.session_mutations import drop_column, mutated_copy

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
        assert reader.models()[0].name == "de\ufffdmo"
    proc = opscope("session", "show", path)
    assert proc.returncode == 0 and "de\ufffdmo" in proc.stdout, proc.stderr


def test_the_app_shows_a_bad_session_in_its_banner(qtbot, tmp_path: Path, recorded: Path) -> None:  # type: ignore[no-untyped-def]
    """Recording into it (--session) or opening it: a banner, never a modal dialog; the app
    records into a new autosave file instead."""
    pytest.importorskip("PySide6")
    from app.shell.workbench import Workbench

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


def test_the_app_never_records_into_a_file_that_cannot_take_it(
    qtbot, tmp_path: Path, recorded: Path
) -> None:  # type: ignore[no-untyped-def]
    """#30: `--session` naming a file whose runs table lacks a column: the app added a run
    to it, saved none of its samples and said "everything measured so far is saved". Now
    the file is never written; the banner says so in one line and names the autosave file
    the recording goes to; the file still opens read-only (the column reads as "-")."""
    pytest.importorskip("PySide6")
    from app.shell.workbench import Workbench

    bad = tmp_path / "c.opscope"
    mutated_copy(recorded, bad, drop_column("runs", "timing_origin_ns"))
    before = bad.read_bytes()
    wb = Workbench(session_path=str(bad), usable=["cpu"])
    qtbot.addWidget(wb.window)
    try:
        assert wb.recording.path != bad and wb.recording.path.exists()
        text = wb.window.banner.text.text()
        assert "\n" not in text and str(bad) in text, text
        assert "cannot take a recording" in text and "nothing was written to it" in text
        assert "runs table lacks column timing_origin_ns" in text
        assert f"Recording into {wb.recording.path} instead" in text
        wb.window.banner.hide()
        wb.open_session(str(bad))  # the read-only window reads it
        assert wb.session_windows and wb.window.banner.isHidden()
    finally:
        wb.shutdown()
    assert bad.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.opscope"]


def test_the_app_quits_on_time_with_a_bad_session(tmp_path: Path, recorded: Path) -> None:
    """`opscope gui BAD --session BAD --quit-after 1`: both errors in the banner; a modal
    dialog used to block --quit-after forever (and the schema error crashed the app)."""
    bad = schema_not_utf8(recorded, tmp_path / "bad.opscope")
    shot = tmp_path / "shot.png"
    proc = opscope("gui", bad, "--session", bad, "--quit-after", "1", "--screenshot", shot,
                   timeout=120)  # fmt: skip
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert shot.stat().st_size > 0


def test_a_killed_writer_reads_interrupted(qtbot, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """SIGKILL of the recording process: its run read `running` forever; now `interrupted`
    in session show, compare, report and the app's session window, while a live writer's
    run still reads `running`."""
    import signal
    import sys
    import time

    from tests.conftest import ROOT

    session = tmp_path / "killed.opscope"
    writer = subprocess.Popen(
        [sys.executable, "-m", "app.entry", "bench", str(DEMO_CNN), "--duration", "120",
         "--threads", "1", "--no-live", "--no-accuracy", "--session", str(session)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            assert time.monotonic() < deadline and writer.poll() is None
            try:
                with open_session_file(session) as reader:
                    runs = reader.runs()
                if runs and runs[0].samples > 0:
                    break
            except SessionFileError:
                pass  # being created
            time.sleep(0.1)
        assert runs[0].status == "running"  # its writer is alive
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait()
    with open_session_file(session) as reader:
        (run,) = reader.runs()
        assert run.status == "interrupted" and "killed" in (run.error or "")
        assert run.samples > 0
    show = opscope("session", "show", session)
    assert show.returncode == 0 and "interrupted" in show.stdout, show.stderr
    compare = opscope("compare", session, session)
    assert "[interrupted]" in compare.stdout, compare.stdout + compare.stderr
    report = tmp_path / "r.html"
    assert opscope("report", session, "-o", report).returncode == 0
    assert "interrupted" in report.read_text()
    pytest.importorskip("PySide6")
    from app.host.job_runner import JobRunner
    from app.sessions.session_window import COLUMNS, SessionWindow

    window = SessionWindow(session, MagicMock(spec=JobRunner))
    qtbot.addWidget(window)
    assert window.table.item(0, COLUMNS.index("status")).text().startswith("interrupted")


def test_a_writers_liveness(tmp_path: Path) -> None:
    """A reused pid (another start time), another host, no writer row: each decided."""
    import json
    import socket

    import psutil

    from engine.session import writer_liveness

    path = tmp_path / "x.opscope"
    path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 84)  # not WAL mode
    me = json.loads(writer_liveness.this_writer())
    assert me["pid"] == os.getpid()
    writer_liveness.opened(path, 1)
    assert writer_liveness.writer_alive(json.dumps(me), path, 1, False) is True
    writer_liveness.closed(path)
    assert writer_liveness.writer_alive(json.dumps(me), path, 1, False) is False  # closed
    parent = {**me, "pid": os.getppid(), "started": psutil.Process(os.getppid()).create_time()}
    assert writer_liveness.writer_alive(json.dumps(parent), path, 1, False) is True
    reused = {**parent, "started": parent["started"] - 3600}  # that pid, another process
    assert writer_liveness.writer_alive(json.dumps(reused), path, 1, False) is False
    elsewhere = {**parent, "host": socket.gethostname() + "-other"}
    assert writer_liveness.writer_alive(json.dumps(elsewhere), path, 1, False) is None
    assert writer_liveness.writer_alive("not json", path, 1, False) is None
    assert writer_liveness.writer_alive(None, path, 1, False) is False  # no row, not WAL
    assert writer_liveness.writer_alive(None, path, 1, True) is None  # WAL: a writer may have it


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[Path]:
    """`folder` seen read-only, for real: chmod a-w for a user; for root, whom chmod does
    not stop, a read-only bind mount (skipped when root may not mount)."""
    if os.geteuid() != 0:
        paths = [folder, *folder.iterdir()]
        modes = {p: p.stat().st_mode for p in paths}
        for p in paths:
            p.chmod(modes[p] & ~0o222)
        try:
            yield folder
        finally:
            for p in paths:
                p.chmod(modes[p])
        return
    view = folder.with_name(folder.name + "-ro")
    view.mkdir()
    if subprocess.run(["mount", "--bind", str(folder), str(view)], capture_output=True).returncode:
        pytest.skip("running as root without the right to mount: no read-only folder to test")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(view)], check=True)
        yield view
    finally:
        subprocess.run(["umount", str(view)], check=True)


def _killed_copy(source: Path, folder: Path) -> Path:
    """What a killed writer leaves: the file and its -wal (the last commits), no -shm."""
    e = live_events(load_model(DEMO_CNN)[1])
    src = folder.parent / "writing.opscope"
    shutil.copyfile(source, src)
    store = SessionStore.create_or_open(src)
    rec = Recorder(store)
    for ev in (e["loaded"], e["started"], *e["batches"]):
        rec.feed(ev)
    rec.flush()
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{src}{suffix}", folder / f"killed.opscope{suffix}")
    store.close()
    return folder / "killed.opscope"


def test_a_read_only_session_is_read_and_never_called_corrupt(
    qtbot,
    tmp_path: Path,
    recorded: Path,  # type: ignore[no-untyped-def]
) -> None:
    """show/compare/export/report read it; writing to it says read-only (it said "corrupt
    session file (attempt to write a readonly database)"); the app says so in its banner."""
    folder = tmp_path / "shared"
    folder.mkdir()
    shutil.copyfile(recorded, folder / "closed.opscope")
    _killed_copy(recorded, folder)
    with read_only(folder) as ro:
        for name in ("closed.opscope", "killed.opscope"):
            path = ro / name
            with open_session_file(path) as reader:
                assert len(reader.runs()) == 1 + (name == "killed.opscope")
            assert opscope("session", "show", path).returncode == 0
            # 4: the run was measured busy (a worker per core), so no verdict: still clean
            assert opscope("compare", f"{path}:1", f"{path}:1").returncode in (0, 4)
            assert opscope("export", path, "--csv", tmp_path / name).returncode == 0
            assert opscope("report", path, "-o", tmp_path / f"{name}.html").returncode == 0
            with pytest.raises(SessionFileError) as err:
                SessionStore.create_or_open(path)
            assert "read-only" in str(err.value) and "corrupt" not in str(err.value)
        bench = ("bench", DEMO_CNN, "--duration", "0.1", "--no-live", "--no-accuracy")
        _one_line(opscope(*bench, "--session", ro / "closed.opscope"), "read-only")
        _one_line(opscope(*bench, "--session", ro / "new.opscope"),
                  f"cannot create it: folder {ro} is read-only")  # fmt: skip
        assert not (ro / "new.opscope").exists()
        pytest.importorskip("PySide6")
        from app.shell.workbench import Workbench

        wb = Workbench(session_path=str(ro / "closed.opscope"), usable=["cpu"])
        qtbot.addWidget(wb.window)
        try:
            assert "read-only" in wb.window.banner.text.text() and wb.recording.path.exists()
        finally:
            wb.shutdown()


def _tiny_disk(folder: Path, size: str) -> None:
    folder.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                          capture_output=True)  # fmt: skip
    if proc.returncode:
        pytest.skip("a full disk needs a tiny tmpfs, and this user may not mount one")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="mounting needs root")
def test_a_full_disk_says_so_and_leaves_no_empty_file(tmp_path: Path) -> None:
    """A real ENOSPC (a tmpfs of 64 KB, then 400 KB): "disk full" in one line, exit 2; it
    said "corrupt session file" and left a 0-byte file (or a traceback mid-run)."""
    for size, what in (("64k", "creating"), ("400k", "mid-run")):
        disk = tmp_path / size
        _tiny_disk(disk, size)
        try:
            session = disk / "s.opscope"
            proc = opscope("bench", DEMO_CNN, "--duration", "4", "--threads", "1",
                           "--no-live", "--no-accuracy", "--session", session)  # fmt: skip
            errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("opscope: error")]
            assert proc.returncode == 2 and len(errors) == 1, proc.stderr
            assert "Traceback" not in proc.stderr and f"{session}: disk full" in errors[0]
            assert session.exists() == (what == "mid-run"), what
        finally:
            subprocess.run(["umount", str(disk)], check=True)


def test_sqlites_own_full_is_disk_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same without root: SQLite's max_page_count gives the very SQLITE_FULL a full
    disk gives. Creating: no file left; recording: a SessionFileError, samples counted."""
    from engine.session import store as store_mod

    real = store_mod.connect_for_writing
    pages = {"max": 4}

    def capped(p: Path, busy_timeout_s: float) -> sqlite3.Connection:
        conn = real(p, busy_timeout_s)
        conn.execute(f"PRAGMA max_page_count = {pages['max']}")
        return conn

    monkeypatch.setattr(store_mod, "connect_for_writing", capped)
    new = tmp_path / "new.opscope"
    with pytest.raises(SessionFileError, match="disk full"):
        SessionStore.create_or_open(new)
    assert not new.exists() and not Path(f"{new}-wal").exists()
    pages["max"] = 1_000
    store = SessionStore.create_or_open(new)
    (used,) = store.db.execute("PRAGMA page_count").fetchone()
    store.db.execute(f"PRAGMA max_page_count = {used + 3}")
    e = live_events(load_model(DEMO_CNN)[1])
    rec = Recorder(store)
    for ev in (e["loaded"], e["started"]):
        rec.feed(ev)
    lats = np.full(50_000, 1_000_000, np.int64)
    rec.feed(LatencyBatch(np.arange(lats.size, dtype=np.int64), lats, e["origin"]))
    with pytest.raises(SessionFileError, match="disk full"):
        rec.flush()
    rec.feed(LatencyBatch(np.arange(10, dtype=np.int64), lats[:10], e["origin"]))
    rec.close()  # no second error: said once
    store.close()
    assert rec.unsaved == 50_010


def test_save_as_into_a_read_only_folder_is_one_line(tmp_path: Path) -> None:
    """The app's Save Session As: SQLite's error escaped the menu action as a traceback."""
    from app.sessions.recording import Recording

    folder = tmp_path / "out"
    folder.mkdir()
    recording = Recording(tmp_path / "live.opscope")
    try:
        with read_only(folder) as ro, pytest.raises(SessionFileError) as err:
            recording.save_as(ro / "saved.opscope")
        assert str(ro / "saved.opscope") in str(err.value) and "\n" not in str(err.value)
        assert recording.path == tmp_path / "live.opscope"  # still recording where it was
    finally:
        recording.close()
