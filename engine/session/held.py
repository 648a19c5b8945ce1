"""Session files this process has open through SQLite, and the one safe way to read their
raw bytes.

SQLite locks a file with POSIX advisory locks, and those belong to the process and the
file, not to a descriptor: closing *any* descriptor of the file in this process drops
every lock the process holds on it (sqlite.org/howtocorrupt.html, 2.2). A plain
`open(path).read(100)` beside a live `SessionStore` (the window checking its own autosave
before showing, exporting or compacting it) therefore unlocked the recording; the next
process to close its connection on the file (a tune trial, a sweep) then took itself for
the last one, checkpointed and deleted the WAL this process was still appending to, and
the file lost those writes or had its b-trees torn ("database disk image is malformed").

So every connection to a session file is held here while it is open, and a raw read of a
held file is not made: callers ask the connection instead, or do without.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from pathlib import Path

Key = tuple[int, int]  # (st_dev, st_ino): locks belong to the file, whatever its name

_lock = threading.Lock()
_held: Counter[Key] = Counter()


def _key(path: str | Path) -> Key | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def hold(path: str | Path) -> Key | None:
    """Note that a connection to `path` is open; pass the result to `release`."""
    key = _key(path)
    if key is not None:
        with _lock:
            _held[key] += 1
    return key


def release(key: Key | None) -> None:
    if key is None:
        return
    with _lock:
        _held[key] -= 1
        if _held[key] <= 0:
            del _held[key]


def is_held(path: str | Path) -> bool:
    """This process has an SQLite connection open on the file `path` names."""
    key = _key(path)
    with _lock:
        return key is not None and key in _held


def read_head(path: str | Path, size: int) -> bytes | None:
    """The first `size` bytes of `path`, or None when this process holds the file open
    (reading it would drop SQLite's locks). OSError as from `open`."""
    if is_held(path):
        return None
    with open(path, "rb") as fh:
        return fh.read(size)
