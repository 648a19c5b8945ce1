"""Naming runs on the command line: `FILE` (its last run), `FILE:ID`, or several runs of
one file, `FILE:1,2,3` (compare and gate pool them)."""

from __future__ import annotations

from pathlib import Path

from engine.errors import SessionFileError
from engine.session.reader import SessionReader
from engine.session.rows import RunRow

MAX_RUN_ID = 2**63 - 1  # SQLite INTEGER


def resolve_run_ref(text: str) -> tuple[str, int | None]:
    """'a.opscope' -> ('a.opscope', None); 'a.opscope:3' -> ('a.opscope', 3).

    An existing file wins, so names that contain ':' still work; only a suffix of ASCII
    digits after the last ':' is a run id, and a lone drive letter ('C:7') stays a path,
    so Windows paths ('C:\\runs\\a.opscope', 'C:\\runs\\a.opscope:2') resolve as meant.
    """
    if Path(text).is_file():
        return text, None
    head, sep, tail = text.rpartition(":")
    if not sep or not head or not (tail.isascii() and tail.isdigit()):
        return text, None
    if len(head) == 1 and head.isalpha():  # 'C:7' is a path on drive C, not run 7 of 'C'
        return text, None
    run_id = int(tail)
    if run_id > MAX_RUN_ID:  # SQLite's integers stop here: no such run
        raise SessionFileError(f"no run {tail} (run ids go up to {MAX_RUN_ID})", head)
    return head, run_id


def open_run(text: str) -> tuple[SessionReader, RunRow]:
    """Open `FILE[:ID]` read-only and pick that run (or the last one). The caller closes
    the reader."""
    path, run_id = resolve_run_ref(text)
    reader = SessionReader.open(path)
    try:
        if run_id is None:
            run_id = reader.last_run_id()
            if run_id is None:
                raise SessionFileError("the session has no runs", path)
        return reader, reader.run(run_id)
    except BaseException:
        reader.close()
        raise


def resolve_run_refs(text: str) -> tuple[str, list[int] | None]:
    """'a.opscope' -> ('a.opscope', None); 'a.opscope:3' -> ('a.opscope', [3]);
    'a.opscope:1,2,3' -> ('a.opscope', [1, 2, 3]). Paths resolve as in `resolve_run_ref`."""
    if Path(text).is_file():
        return text, None
    head, sep, tail = text.rpartition(":")
    parts = tail.split(",")
    if "," not in tail or not sep or not head:
        path, run_id = resolve_run_ref(text)
        return path, None if run_id is None else [run_id]
    if len(head) == 1 and head.isalpha():
        return text, None
    if not all(p.isascii() and p.isdigit() for p in parts):
        raise SessionFileError(f"bad run list {tail!r} (expected run ids like 1,2,3)", head)
    ids = [int(p) for p in parts]
    if max(ids) > MAX_RUN_ID:
        raise SessionFileError(f"no run {max(ids)} (run ids go up to {MAX_RUN_ID})", head)
    if len(set(ids)) != len(ids):
        raise SessionFileError(f"run list {tail!r} names a run twice", head)
    return head, ids


def is_run_list(text: str) -> bool:
    """Whether `text` names several runs (`FILE:1,2`), without opening anything."""
    if Path(text).is_file():
        return False
    head, sep, tail = text.rpartition(":")
    return bool(sep and head and "," in tail)
