"""Another process holding the session file's lock while a run records (#16): the run goes
on, its writes wait in memory and land when the lock goes; what cannot be saved within
the grace period is counted and said, and the run never turns `cancelled` for it."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np

from engine.events import LatencyBatch, RunEnded
from engine.model.info import ModelInfo, load_model
from engine.session import Recorder, SessionStore, open_session_file
from tests.conftest import DEMO_CNN
from tests.recorded_sessions import opscope
from tests.session_material import live_events


class Lock:
    """A connection of its own holding `BEGIN EXCLUSIVE` on `path` for `hold_s` seconds
    (from a thread: SQLite's locks are per connection, not per process, in WAL mode)."""

    def __init__(self, path: Path, hold_s: float, *, after_runs: int = 0) -> None:
        self.path, self.hold_s, self.after_runs = path, hold_s, after_runs
        self.taken = threading.Event()
        self.release = threading.Event()  # set to let go before hold_s
        self.released = threading.Event()
        self.thread = threading.Thread(target=self._hold, daemon=True)

    def start(self) -> Lock:
        self.thread.start()
        return self

    def _hold(self) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # until the run's row exists
            try:
                if self.path.exists() and self._runs() >= self.after_runs:
                    break
            except sqlite3.Error:
                pass
            time.sleep(0.05)
        conn = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        conn.execute("BEGIN EXCLUSIVE")
        self.taken.set()
        self.release.wait(self.hold_s)
        conn.execute("COMMIT")
        conn.close()
        self.released.set()

    def _runs(self) -> int:
        conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=0.1)
        try:
            return int(conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
        finally:
            conn.close()


def test_a_run_waits_for_a_lock_and_saves_every_sample(tmp_path: Path) -> None:
    """A 2.5 s lock in the middle of a 4 s bench: one line says so, every sample lands
    (1,660 of 7,262 did, with a traceback and the run stored as cancelled)."""
    session, out = tmp_path / "s.opscope", tmp_path / "r.json"
    lock = Lock(session, 2.5, after_runs=1).start()
    proc = opscope("bench", DEMO_CNN, "--duration", "4", "--threads", "1", "--no-live",
                   "--no-accuracy", "--session", session, "--json", out)  # fmt: skip
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert lock.released.wait(10)
    said = proc.stderr
    assert "session file locked by another process; waiting," in said, said
    assert "samples held in memory" in said and "free again" in said, said
    n = json.loads(out.read_text())["latency_ms"]["count"]
    with open_session_file(session) as reader:
        (run,) = reader.runs()
        assert run.status == "ok" and run.samples == n
        assert reader.latency(run.id)[1].size == n


def _info() -> ModelInfo:
    return load_model(DEMO_CNN)[1]


def test_a_lock_that_outlives_the_run_is_counted_not_cancelled(tmp_path: Path) -> None:
    """The lock outlasts the run and the grace period: the samples fed after it was taken
    are counted as unsaved and said; the run is never marked cancelled."""
    path = tmp_path / "held.opscope"
    lines: list[str] = []
    e = live_events(_info())
    store = SessionStore.create_or_open(path)
    rec = Recorder(store, notify=lines.append)
    rec.feed(e["loaded"])
    rec.feed(e["started"])
    rec.feed(e["batches"][0])
    rec.flush()  # 3 samples saved
    lock = Lock(path, 3.0).start()
    assert lock.taken.wait(10)
    lats = np.full(40, 1_000_000, np.int64)
    rec.feed(LatencyBatch(np.arange(40, dtype=np.int64) * 1_000_000, lats, e["origin"]))
    rec.flush()
    assert rec.waiting is not None and rec.waiting.samples == 40
    assert lines == ["session file locked by another process; waiting, 40 samples held in memory"]
    rec.feed(RunEnded("ok"))
    rec.close(grace_s=0.3)
    store.close()
    assert rec.unsaved == 40 and "40 samples not saved" in lines[-1]
    assert lock.released.wait(10)
    with open_session_file(path) as reader:
        (run,) = reader.runs()
        # its end never written and its store closed: interrupted, not cancelled
        assert run.samples == 3 and run.status == "interrupted"


def test_a_short_lock_in_process_loses_nothing(tmp_path: Path) -> None:
    """The same with the lock gone before the end: the held writes land, in order (run
    row, samples, its end), and the run reads `ok`."""
    path = tmp_path / "short.opscope"
    e = live_events(_info())
    store = SessionStore.create_or_open(path)
    rec = Recorder(store)
    rec.feed(e["loaded"])
    lock = Lock(path, 1.0).start()
    assert lock.taken.wait(10)
    for ev in (e["started"], *e["batches"], e["done"], RunEnded("ok")):
        rec.feed(ev)
    assert rec.waiting is not None and rec.run_id is None  # nothing written yet
    rec.close()
    store.close()
    assert rec.unsaved == 0 and rec.waiting is None
    with open_session_file(path) as reader:
        (run,) = reader.runs()
        assert run.status == "ok" and run.samples == 5
        assert reader.latency(run.id)[1].tolist() == e["lats"].tolist()


def test_the_apps_status_line_says_the_file_is_locked(tmp_path: Path) -> None:
    """The app records on its engine-reader thread; its status bar reads `status()`."""
    from app.sessions.recording import Recording

    path = tmp_path / "app.opscope"
    e = live_events(_info())
    recording = Recording(path)
    recording.sink([e["loaded"], e["started"], e["batches"][0]])
    recording.flush()
    lock = Lock(path, 1.5).start()
    assert lock.taken.wait(10)
    recording.sink([e["batches"][1]])
    recording.flush()
    assert "locked by another process; waiting, 2 samples held" in recording.status()
    assert lock.released.wait(10)
    recording.sink([e["done"], RunEnded("ok")])
    recording.close()
    assert "locked" not in recording.status()
    with open_session_file(path) as reader:
        (run,) = reader.runs()
        assert run.status == "ok" and run.samples == 5


def test_copying_a_trials_runs_into_a_locked_session_is_one_line(tmp_path: Path) -> None:
    """The tuner's Ray path copies each trial's runs into the session: a lock held by
    another process there was an sqlite3.OperationalError traceback."""
    import pytest

    from engine.errors import SessionFileError
    from engine.session.merge import copy_runs

    trial, target = tmp_path / "trial.opscope", tmp_path / "target.opscope"
    e = live_events(_info())
    with SessionStore.create_or_open(trial) as store:
        rec = Recorder(store)
        for ev in (e["loaded"], e["started"], *e["batches"], RunEnded("ok")):
            rec.feed(ev)
        rec.close()
    store = SessionStore.create_or_open(target)
    store.set_busy_timeout(0.05)
    lock = Lock(target, 1.0).start()
    assert lock.taken.wait(10)
    with pytest.raises(SessionFileError, match=r"locked by another process.*copying the runs of"):
        copy_runs(store, trial)
    assert lock.released.wait(10)
    assert len(copy_runs(store, trial)) == 1  # and once the lock is gone, it copies
    store.close()


def test_a_lock_held_when_the_run_starts_is_waited_for(tmp_path: Path) -> None:
    """A closed session (rollback journal: an exclusive lock stops even reads) locked as
    `bench --session` starts: it says so, waits, and records once the lock goes (it failed
    after 5 s of SQLite's busy wait: "corrupt session file (database is locked)")."""
    import subprocess
    import sys

    from engine.events import ModelLoaded
    from tests.conftest import ROOT

    session = tmp_path / "closed.opscope"
    with SessionStore.create_or_open(session) as store:
        rec = Recorder(store)
        rec.feed(ModelLoaded(_info()))
        rec.close()
    lock = Lock(session, 60).start()
    assert lock.taken.wait(10)
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.entry", "bench", str(DEMO_CNN), "--duration", "0.2",
         "--threads", "1", "--no-live", "--no-accuracy", "--session", str(session)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    said = []
    for line in proc.stderr:  # the lock goes once the waiting is said
        said.append(line)
        if "session file locked by another process; waiting to open it" in line:
            lock.release.set()
            break
    rest = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(120) == 0 and lock.release.is_set(), "".join(said) + rest
    with open_session_file(session) as reader:
        assert [r.status for r in reader.runs()] == ["ok"]


def test_a_study_written_while_another_connection_commits_is_kept(tmp_path: Path) -> None:
    """A study's row (an LLM serving study, a memory report) written while another
    connection commits between the write's begin and its insert: a deferred transaction
    that read first cannot take the write lock then (WAL's snapshot rule: SQLITE_BUSY at
    once, no busy wait; the afternoon's demo LLM study failed so, 'database is locked'). The
    write takes its lock at its begin, so the other waits for it."""
    path = tmp_path / "race.opscope"
    SessionStore.create_or_open(path).close()
    store = SessionStore.create_or_open(path)
    other = sqlite3.connect(path, isolation_level=None, timeout=0.2)
    other.execute("PRAGMA journal_mode=WAL")
    fired: list[str] = []
    seen: list[str] = []

    def between(statement: str) -> None:  # the other writes once the study has begun
        seen.append(statement.lstrip().upper())
        began = any(s.startswith("BEGIN") for s in seen)
        if not fired and began and statement.lstrip().upper().startswith(("SAVEPOINT", "INSERT")):
            fired.append(statement)
            try:
                other.execute("INSERT INTO meta (key, value) VALUES ('other', 'x')")
            except sqlite3.OperationalError as exc:  # the study holds the lock: it waits
                fired.append(f"waited: {exc}")

    store.db.conn.set_trace_callback(between)
    try:
        study = store.add_llm_study(model_path="m", kind="simulate", config={}, plan={},
                                    rows=[{"layout": "colocated"}])  # fmt: skip
    finally:
        store.db.conn.set_trace_callback(None)
        store.close()
        other.close()
    assert len(fired) == 2 and fired[1].startswith("waited"), fired  # the study held it
    conn = sqlite3.connect(path)
    try:
        assert [r[0] for r in conn.execute("SELECT id FROM llm_studies")] == [study]
    finally:
        conn.close()
