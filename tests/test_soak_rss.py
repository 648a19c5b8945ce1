"""bench/rss.py's readers, which the soak splits the window's growth with: resident memory
as anonymous or file-backed (smaps_rollup), and Python's own arenas (pymalloc), which
malloc's figure does not hold. Real allocations and a real mapped file, read back."""

from __future__ import annotations

import mmap
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench import rss  # noqa: E402

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/smaps_rollup").exists(), reason="Linux /proc/PID/smaps_rollup"
)

MB = 1 << 20


def test_rollup_splits_anonymous_from_file_backed(tmp_path: Path) -> None:
    before = rss.rollup(os.getpid())
    assert before["rss"] == before["anon"] + before["file"]
    path = tmp_path / "mapped.bin"
    path.write_bytes(b"\1" * (32 * MB))
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as view:
        touched = sum(view[i] for i in range(0, len(view), 4096))  # every page resident
        mapped = rss.rollup(os.getpid())
    assert touched == 32 * MB // 4096
    assert mapped["file"] - before["file"] > 24 * MB  # the file's pages, not anonymous
    assert abs(mapped["anon"] - before["anon"]) < 8 * MB
    block = bytearray(32 * MB)  # zero-filled: each page written, so resident
    anon = rss.rollup(os.getpid())
    assert anon["anon"] - mapped["anon"] > 24 * MB
    del block


def test_rollup_of_a_process_that_is_gone_is_empty() -> None:
    assert rss.rollup(2**22 + 12345) == {}


def test_pymalloc_counts_the_arenas_small_objects_take() -> None:
    before = rss.pymalloc()
    if not before:
        pytest.skip("this Python does not report pymalloc's statistics")
    small = [(i, str(i)) for i in range(300_000)]  # tuples and strings: pymalloc's size
    during = rss.pymalloc()
    assert during["arenas"] - before["arenas"] >= 8  # 1 MiB each
    assert during["in blocks"] - before["in blocks"] > 8 * MB
    del small


def test_malloc_free_reads_fragmentation_as_holes() -> None:
    import ctypes

    before = rss.malloc_free()
    if not before:
        pytest.skip("not glibc")
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(1000) for _ in range(20_000)]  # 20 MB in small chunks
    for p in blocks[::2]:  # every other freed: 1 KB holes between live neighbours
        libc.free(p)
    holed = rss.malloc_free()
    for p in blocks[1::2]:
        libc.free(p)
    assert holed["holes"] - before["holes"] > 5 * MB  # 10,000 holes of 1 KB (tcache keeps 7)
    assert holed["system"] >= before["system"]


def test_a_census_leaves_a_tuple_another_thread_builds_alone(qapp: object) -> None:
    """The soak's census beside a thread building tuples from generators, as the window's
    wire reader does: holding every object in a list while that thread ran made its tuple's
    resize fail (SystemError), and the window then refused its host as malformed."""
    import threading

    from bench import soak

    errors: list[BaseException] = []
    stop = threading.Event()

    def build() -> None:
        def items() -> object:
            for i in range(200):  # noqa: UP028 (no length hint: the tuple grows by
                yield i  # resizing; this loop, unlike `yield from`, lets threads switch)

        while not stop.is_set():
            try:
                tuple(items())  # type: ignore[call-overload]
            except SystemError as exc:
                errors.append(exc)
                return

    keep = [[i] for i in range(100_000)]  # a census long enough for the other thread to run
    builder = threading.Thread(target=build, daemon=True)
    builder.start()
    try:
        for _ in range(2):
            counts = soak.census(qapp)
            assert counts["list"] >= len(keep)
    finally:
        stop.set()
        builder.join(10)
    assert not errors, errors
