"""engine/run/memory_trim.py: glibc's malloc_trim at intervals: the window's every minute by
default, the host's only when asked."""

from __future__ import annotations

import ctypes
import threading
import time
from pathlib import Path

import pytest

from engine.run import memory_trim
from engine.run.memory_trim import (
    WINDOW_EVERY_S,
    Trimmer,
    glibc_malloc_trim,
    resident_bytes,
    start_for_window,
    start_from_env,
)

TRIM = glibc_malloc_trim()
needs_glibc = pytest.mark.skipif(TRIM is None, reason="no glibc here")


@pytest.fixture(autouse=True)
def _fresh_process_trimmer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees a process with no trimmer started yet (one per process otherwise)."""
    monkeypatch.setattr(memory_trim, "_started", None)


def _trim_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "opscope-malloc-trim"]


def test_nothing_starts_unless_asked() -> None:
    before = len(_trim_threads())
    for env in ({}, {"OPSCOPE_MALLOC_TRIM_S": "0"}, {"OPSCOPE_MALLOC_TRIM_S": "soon"}):
        assert start_from_env(env) is None
    assert start_from_env({"OPSCOPE_MALLOC_TRIM_S": "nan"}) is None
    assert len(_trim_threads()) == before


def test_nothing_starts_without_glibc() -> None:
    asked = {"OPSCOPE_MALLOC_TRIM_S": "0.01"}
    assert start_from_env(asked, find_trim=lambda: None) is None
    assert memory_trim._started is None


@needs_glibc
def test_trim_gives_freed_heap_memory_back() -> None:
    """Freed small blocks under a live one stay resident until malloc_trim returns them."""
    assert TRIM is not None
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    size, count = 16 << 10, 3000  # 48 MB in blocks under the mmap threshold: heap memory
    blocks = [libc.malloc(size) for _ in range(count)]
    for b in blocks:
        libc.memset(b, 1, size)  # touched: resident
    keep = libc.malloc(size)  # above the freed blocks: free() alone cannot shrink the heap
    for b in blocks:
        libc.free(b)
    try:
        before, after, released = Trimmer(TRIM, 60).trim_once()
    finally:
        libc.free(keep)
    assert released == 1
    assert before - after > (size * count) // 2, (before, after)


@needs_glibc
def test_started_trimmer_trims_periodically_and_logs(tmp_path: Path) -> None:
    log = tmp_path / "trims.tsv"
    env = {"OPSCOPE_MALLOC_TRIM_S": "0.01", "OPSCOPE_MALLOC_TRIM_LOG": str(log)}
    trimmer = start_from_env(env)
    assert trimmer is not None
    try:
        assert start_from_env(env) is trimmer  # one per process, however often asked
        deadline = time.monotonic() + 30  # a deadline for a loaded machine, not a speed
        while trimmer.trims < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        trimmer.stop()
    assert trimmer.trims >= 3
    rows = [line.split("\t") for line in log.read_text().splitlines()]
    assert len(rows) >= 3
    assert all(len(r) == 6 and int(r[2]) > 0 and int(r[3]) > 0 for r in rows)
    assert all(0 <= float(r[5]) < 30 for r in rows)  # the trim's own duration, seconds
    assert not trimmer._thread.is_alive()


@needs_glibc
def test_the_window_trims_every_minute_unless_the_environment_says_otherwise() -> None:
    started: list[Trimmer] = []
    try:
        for env, every in (({}, WINDOW_EVERY_S), ({"OPSCOPE_MALLOC_TRIM_S": " "}, 60.0),
                           ({"OPSCOPE_MALLOC_TRIM_S": "5"}, 5.0)):  # fmt: skip
            memory_trim._started = None
            trimmer = start_for_window(env)
            assert trimmer is not None and trimmer.every_s == every
            started.append(trimmer)
        memory_trim._started = None
        assert start_for_window({"OPSCOPE_MALLOC_TRIM_S": "0"}) is None  # the user's off
    finally:
        for t in started:
            t.stop()
    assert WINDOW_EVERY_S == 60.0


def test_the_host_trims_only_when_asked() -> None:
    """The host starts its trimmer with no default: a trim holds the arenas' locks while it
    walks them, a stall its timed runs must not see."""
    from engine.run import host

    assert host.start_memory_trim is start_from_env
    assert start_from_env({}) is None


def test_resident_bytes_reads_this_process() -> None:
    assert resident_bytes() > 1 << 20
