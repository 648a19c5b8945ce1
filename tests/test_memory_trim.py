"""engine/run/memory_trim.py: glibc's malloc_trim at intervals, started only when asked."""

from __future__ import annotations

import ctypes
import threading
import time
from pathlib import Path

import pytest

from engine.run import memory_trim
from engine.run.memory_trim import Trimmer, glibc_malloc_trim, resident_bytes, start_from_env

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
    assert all(len(r) == 5 and int(r[2]) > 0 and int(r[3]) > 0 for r in rows)
    assert not _trim_threads()


def test_resident_bytes_reads_this_process() -> None:
    assert resident_bytes() > 1 << 20
