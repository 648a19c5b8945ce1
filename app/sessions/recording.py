"""The app's session file: everything the live engine sends is recorded as it arrives.

Recording happens on the engine client's reader thread (never the GUI thread), so a slow
disk cannot stall painting; the GUI keeps what was recorded even if the engine host dies.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.api import (
    AccuracyResult,
    Compacted,
    ContentionSample,
    GenerationSteps,
    LatencyBatch,
    OpProfile,
    Recorder,
    RunEnded,
    RunStarted,
    ServedRequests,
    ServingStarted,
    SessionFileError,
    SessionStore,
    TimingDone,
    compact_copy,
    corrupt,
    remove_session_file,
    writer_liveness,
)

CLOSE_GRACE_S = 5.0  # quitting waits this long for a lock another process holds
# a run's own facts, dropped with it when it ends with nothing measured
_RUN_FACTS = (RunStarted, AccuracyResult, TimingDone, ContentionSample, LatencyBatch, RunEnded)
# what makes a run worth its row: samples, a serving run (asked for: kept even if it ends
# at once), a timed generation (not its shape alone), a profile
_MEASURED = (ServingStarted, ServedRequests, GenerationSteps, OpProfile)


def _measured(ev: Any) -> bool:
    if isinstance(ev, LatencyBatch):
        return bool(ev.latencies_ns.size)
    if isinstance(ev, TimingDone):
        return ev.latency.count > 0
    if isinstance(ev, RunEnded):
        return ev.status == "error"  # a failure is kept, with its error
    return isinstance(ev, _MEASURED)


def autosave_dir() -> Path:
    """Where unsaved sessions live (e.g. ~/.local/share/opscope/sessions)."""
    import os

    env = os.environ.get("OPSCOPE_SESSION_DIR")
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_data_dir("opscope", appauthor=False)) / "sessions"


def new_autosave_path() -> Path:
    folder = autosave_dir()
    folder.mkdir(parents=True, exist_ok=True)
    return folder / datetime.now().strftime("session-%Y%m%d-%H%M%S.opscope")


class Recording:
    """One session file being written by the live app."""

    def __init__(self, path: str | Path) -> None:
        self._lock = threading.Lock()
        self.store = SessionStore.create_or_open(path)
        self.recorder = Recorder(self.store, kind="live")
        self.path = Path(path)
        # per RunStarted seen, in order: the recorder's number for its run (None while it
        # is held, or for good once dropped); the file's id comes from that (`run_id`)
        self._started: list[int | None] = []
        # a run's events held from its RunStarted until it measures something: a config
        # applied while timing is paused starts a run that may end with nothing, and is
        # then never written (no empty run in the file, nor in the Runs dock)
        self._held: list[Any] = []

    def sink(self, batch: list[Any]) -> None:
        with self._lock:
            for ev in batch:
                self._feed(ev)

    def run_id(self, started: int) -> int | None:
        """The file's id of the run of the `started`-th RunStarted the engine sent (0 the
        first), once it is written; None before, or for a run that measured nothing."""
        with self._lock:
            order = self._started[started] if 0 <= started < len(self._started) else None
            return None if order is None else self.recorder.run_ids.get(order)

    def own_run_ids(self) -> set[int]:
        """The file's ids of the runs this window's recorder wrote (a job's, recorded by a
        process of its own, are not among them)."""
        with self._lock:
            return set(self.recorder.run_ids.values())

    def _feed(self, ev: Any) -> None:
        if isinstance(ev, RunStarted):
            self._drop_held()
            self._held = [ev]
            self._started.append(None)
        elif not self._held:
            self.recorder.feed(ev)
        elif _measured(ev):
            self._started[-1] = self.recorder.opened
            held, self._held = self._held, []
            self.recorder.feed_many([*held, ev])
        else:
            self._held.append(ev)
            if isinstance(ev, RunEnded):
                self._drop_held()

    def _drop_held(self) -> None:
        """The held run measured nothing: what it carried besides its own facts (a model,
        a variant, notices, markers, telemetry) is recorded, the run is not."""
        held, self._held = self._held, []
        self.recorder.feed_many(e for e in held if not isinstance(e, _RUN_FACTS))

    def flush(self) -> None:
        """Commit what is buffered (before exporting from the file)."""
        with self._lock:
            self.recorder.flush()

    def host_died(self, why: str) -> None:
        """The engine died mid-run: keep its samples, mark the run as failed (a run that
        had measured nothing yet is not recorded)."""
        with self._lock:
            self._drop_held()
            if self.recorder.active:
                self.recorder.fail(why)
            self.recorder.flush()

    def save_as(self, dest: str | Path) -> Path:
        """Copy the session (SQLite's online backup) to `dest` and keep recording there."""
        dest = Path(dest)
        if dest.resolve() == self.path.resolve():
            self.flush()  # already recording there: every committed sample is in it
            return self.path
        with self._lock:
            self.recorder.flush()
            try:
                remove_session_file(dest)  # the dialog asked; its stale -wal goes too
            except OSError as exc:
                raise corrupt(dest, exc) from exc
            try:
                target = sqlite3.connect(str(dest))
                try:
                    self.store.db.conn.backup(target)
                finally:
                    target.close()
            except sqlite3.Error as exc:  # a full disk, a read-only folder: said in one line
                with contextlib.suppress(OSError):  # a read-only folder refuses even this
                    remove_session_file(dest)
                raise corrupt(dest, exc) from exc
            old = self.store
            self.store = SessionStore.create_or_open(dest)
            self.recorder.store = self.store
            self.recorder.writes.path = dest
            if self.recorder.active and self.recorder.run_id is not None:
                writer_liveness.opened(dest, self.recorder.run_id)  # its run goes on, written there
            old.close()
            self.path = dest
        return dest

    def status(self) -> str:
        """The file, and whether another process has it locked (writes held in memory)."""
        wait = self.recorder.waiting
        unsaved = self.recorder.unsaved
        text = f"session: {self.path}"
        if wait is not None:
            text += f" — {wait.line()}"
        if unsaved:
            text += f" — {unsaved:,} samples NOT saved"
        return text

    def compact_copy(self, dest: str | Path, keep_passes: int | None) -> Compacted:
        """A compact copy of the session so far at `dest` (replaced: the save dialog asked),
        for handing on; recording goes on in this file. Runs off the GUI thread."""
        dest = Path(dest)
        if dest.resolve() == self.path.resolve():
            raise SessionFileError("is the session being recorded: choose another name", dest)
        self.flush()
        try:
            remove_session_file(dest)
        except OSError as exc:
            raise corrupt(dest, exc) from exc
        return compact_copy(self.path, dest, keep_passes)

    def close(self) -> None:
        with self._lock:
            self._drop_held()
            self.recorder.close(grace_s=CLOSE_GRACE_S)
            self.store.close()
