"""The recorder's writes, in order, surviving another process holding the file's lock.

A session is written by one process, but anything may open it: a `sqlite3` shell doing
`BEGIN EXCLUSIVE`, a backup tool, a second OpScope. A write that meets SQLITE_BUSY stays
queued in memory (with the samples it holds) and the queue is tried again every
LOCK_RETRY_S, so the run goes on and everything lands once the lock goes. Any other
failure (a full disk, a read-only file) is final: said once, as a SessionFileError
naming its cause, and what is left is counted as unsaved.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.errors import SessionFileError
from engine.session.store import SessionStore
from engine.session.trust import corrupt, is_locked

LOCK_WAIT_S = 0.05  # SQLite's busy wait per try while the file is locked by another process
LOCK_RETRY_S = 1.0  # between tries while it is
LOCK_GRACE_S = 30.0  # how long `settle` waits for the lock at the end of a recording

Write = Callable[[], object]  # one transaction; its result is not used


@dataclass(frozen=True)
class LockWait:
    """The file is locked by another process: since when (the queue's clock), and the
    samples held in memory until it is free."""

    since: float
    samples: int

    def line(self) -> str:
        return (
            f"session file locked by another process; waiting, {self.samples:,} samples "
            "held in memory"
        )


class WriteQueue:
    """Ordered writes to one session file. `put` queues and tries; `settle` waits for a
    lock to go (bounded); `notify` gets one line when the file locks and when it frees."""

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], float] = time.monotonic,
        notify: Callable[[str], None] | None = None,
    ) -> None:
        self.path = path
        self.notify = notify
        self.unsaved = 0  # samples that will never be written (given up, or broken)
        self.broken: SessionFileError | None = None  # a write failed for good
        self._clock = clock
        self._writes: list[tuple[Write, int]] = []  # (write, samples it holds)
        self._locked_since: float | None = None
        self._last_try = 0.0

    def held(self) -> int:
        """Samples in queued writes."""
        return sum(n for _, n in self._writes)

    def waiting(self, buffered: int = 0) -> LockWait | None:
        """Set while the file is locked; `buffered` adds samples not yet queued."""
        if self._locked_since is None:
            return None
        return LockWait(self._locked_since, self.held() + buffered)

    def put(self, write: Write, samples: int = 0) -> None:
        """Queue `write` behind every earlier one, then try them all."""
        if self.broken is not None:
            self.unsaved += samples  # said once, when it broke
            return
        self._writes.append((write, samples))
        self.drain()

    def drain(self, *, now: bool = False) -> bool:
        """Run the queued writes in order; False while another process holds the lock
        (they stay queued; tried again after LOCK_RETRY_S unless `now`)."""
        if self.broken is not None:
            return True
        t = self._clock()
        if self._locked_since is not None and not now and t - self._last_try < LOCK_RETRY_S:
            return False
        self._last_try = t
        while self._writes:
            write, _ = self._writes[0]
            try:
                write()
            except sqlite3.Error as exc:
                if not is_locked(exc):
                    self.broken = corrupt(self.path, exc)
                    self.unsaved += self.held()
                    self._writes.clear()
                    raise self.broken from exc
                if self._locked_since is None:
                    self._locked_since = t
                    self._say(LockWait(t, self.held()).line())
                return False
            self._writes.pop(0)
        if self._locked_since is not None:
            waited = self._clock() - self._locked_since
            self._locked_since = None
            self._say(f"session file free again after {waited:.1f} s; everything held saved")
        return True

    def settle(self, grace_s: float = LOCK_GRACE_S) -> bool:
        """Wait up to `grace_s` for a lock to go; True when every write landed."""
        deadline = self._clock() + grace_s
        while not self.drain(now=True):
            left = deadline - self._clock()
            if left <= 0:
                return False
            time.sleep(min(LOCK_RETRY_S, left))
        return self.broken is None

    def give_up(self, grace_s: float) -> None:
        """After `settle` failed: drop what is queued, count it, say so."""
        lost = self.held()
        self.unsaved += lost
        self._writes.clear()
        self._say(f"session file still locked after {grace_s:g} s: {lost:,} samples not saved")

    def _say(self, line: str) -> None:
        if self.notify is not None:
            self.notify(line)


def open_waiting(
    path: str | Path, notify: Callable[[str], None], grace_s: float = LOCK_GRACE_S
) -> SessionStore:
    """`SessionStore.create_or_open`, waiting up to `grace_s` (saying so once) while
    another process holds the file's lock; any other refusal at once."""
    deadline = time.monotonic() + grace_s
    said = False
    while True:
        try:
            return SessionStore.create_or_open(path, busy_timeout_s=LOCK_RETRY_S)
        except SessionFileError as exc:
            if not _locked(exc) or time.monotonic() >= deadline:
                raise
            if not said:
                notify("session file locked by another process; waiting to open it")
                said = True


def _locked(exc: BaseException) -> bool:
    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and cause not in chain:  # a cause can loop back
        if is_locked(cause):
            return True
        chain.append(cause)
        cause = cause.__cause__
    return False
