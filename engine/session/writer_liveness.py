"""Is the process recording a run still alive? A run killed with SIGKILL (or a crash, a
power cut) keeps status `running` in its file forever; readers show it as `interrupted`
once its writer is known to be gone.

While a run is open its writer keeps `meta["writer:<run id>"]` = `{"pid", "host",
"started"}` (the process's start time, so a reused pid is not taken for it); `end_run`
removes it. A reader on the same host checks that process; on another host it cannot
tell and the run stays `running`. A file with no such row (an older OpScope) is known to
have no writer when it is not in WAL mode (every writer keeps WAL on while open).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import psutil

from engine.hostinfo import host_name

KEY_PREFIX = "writer:"
START_SLACK_S = 1.0  # create_time is rounded differently between calls on some systems

# (file, run id) of the runs this process's stores have open: a run of this very process
# whose store was closed without ending it (the lock outlived the grace) is not alive.
_open_here: set[tuple[str, int]] = set()


def opened(path: Path, run_id: int) -> None:
    _open_here.add((_name(path), run_id))


def closed(path: Path, run_id: int | None = None) -> None:
    """Forget one run of `path`, or every run of it (its store closed)."""
    name = _name(path)
    for entry in [e for e in _open_here if e[0] == name and run_id in (None, e[1])]:
        _open_here.discard(entry)


def _name(path: Path) -> str:
    return os.path.realpath(path)


def key(run_id: int) -> str:
    return f"{KEY_PREFIX}{run_id}"


def this_writer() -> str:
    """The facts a writer records for its open run (JSON text)."""
    return json.dumps(
        {"pid": os.getpid(), "host": (host_name() or ""), "started": _started(os.getpid())}
    )


def writer_alive(text: str | None, path: Path, run_id: int, wal_mode: bool) -> bool | None:
    """True/False when known, None when it cannot be told (a writer on another host).
    `wal_mode`: the file's header said WAL when it was opened (a writer may have it)."""
    if text is None:
        return None if wal_mode else False
    facts = _facts(text)
    if facts is None:
        return None
    pid, host, started = facts
    if host != (host_name() or ""):
        return None
    if pid == os.getpid():
        return (_name(path), run_id) in _open_here
    now_started = _started(pid)
    if now_started is None:
        return False
    return abs(now_started - started) <= START_SLACK_S


def _facts(text: str) -> tuple[int, str, float] | None:
    try:
        data: Any = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    pid, host, started = data.get("pid"), data.get("host"), data.get("started")
    if not isinstance(pid, int) or isinstance(pid, bool) or not isinstance(host, str):
        return None
    if not isinstance(started, int | float) or isinstance(started, bool):
        return None
    return pid, host, float(started)


def _started(pid: int) -> float | None:
    """When process `pid` started (epoch s), or None when there is no such process."""
    try:
        return float(psutil.Process(pid).create_time())
    except (psutil.Error, OSError, ValueError, OverflowError):
        return None
