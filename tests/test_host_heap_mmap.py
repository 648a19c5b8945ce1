"""The engine host's `[heap]` does not grow with its profiling passes (bench/host_heap.py).

glibc's malloc serves a block of at least its mmap threshold (128 KiB) with an mmap of its
own, given back to the OS when freed; but by default each such block freed raises the
threshold to its size (up to 32 MiB). A profiling pass frees megabytes of those (its
session, its profile's text), so every later pass took them from the main heap instead,
where a small block left above them keeps the heap from shrinking: the host's `[heap]`
grew about 1 MB at a time with passes (+2.1 MB over a soak's hour, 15 passes), not with
samples. The host holds the threshold where it is (`hold_mmap_threshold`)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")

PROBE = textwrap.dedent(
    """
    import ctypes, sys

    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
            "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    if sys.argv[1] == "host":
        from engine.run.host import hold_mmap_threshold
        assert hold_mmap_threshold()
    size = 4 << 20  # a pass's profile text: megabytes
    libc.free(libc.malloc(size))  # freed: glibc's own rule raises its threshold past it
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(size)  # the next pass's: its own mmap, or from the heap?
    print(libc.mallinfo2().hblkhd - before >= size)
    libc.free(block)
    """
)


def _own_mmap(mode: str) -> bool:
    """In a fresh process (glibc's threshold is per process): whether a 4 MiB block, after
    one of that size was freed, is served by an mmap of its own."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip() == "True"


def test_glibc_alone_takes_a_big_block_from_the_heap_after_one_was_freed() -> None:
    assert not _own_mmap("plain")  # what the host did before: the probe can tell


def test_the_host_keeps_big_blocks_out_of_its_heap() -> None:
    assert _own_mmap("host")
