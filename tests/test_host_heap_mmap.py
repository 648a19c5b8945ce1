"""The engine host's `[heap]` does not grow with its profiling passes (bench/host_heap.py).

glibc's malloc serves a block of at least its mmap threshold (128 KiB) with an mmap of its
own, given back to the OS when freed; but each such block freed raises the threshold to its
size (up to 32 MiB). A profiling pass frees megabytes of them (its session, its profile's
text), so every later pass took them from the main heap instead, where a small block left
above them keeps the heap from shrinking: the host's `[heap]` grew about 1 MB at a time
with its passes (+2.1 MB over a soak's hour, 15 passes), not with its samples. A pass now
runs with the threshold at 128 KiB (its big blocks mmapped and given back); timing runs
with it high, as glibc's own rule had it (a run's big output reused from the heap, not
mmapped and faulted in again each run)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.conftest import DEMO_CNN

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

    def own_mmap():
        # a block bigger than all the free memory malloc holds (the heap cannot serve it),
        # after one of its size was freed: an mmap of its own, or the heap grown for it?
        size = libc.mallinfo2().fordblks + (1 << 20)
        assert size < 30 << 20, size  # under glibc's ceiling, where its own rule applies
        libc.free(libc.malloc(size))  # freed: glibc's own rule raises its threshold past it
        before = libc.mallinfo2().hblkhd
        block = libc.malloc(size)
        mapped = libc.mallinfo2().hblkhd - before >= size
        libc.free(block)
        return mapped

    from engine.backends.base import PrepareRequest
    from engine.config import RunConfig
    from engine.events import LatencyBatch
    from engine.model.workload import JobInputs, Workload
    from engine.run.live import LiveRun, stage

    gen = stage(PrepareRequest(Workload(sys.argv[1], RunConfig(), JobInputs())), "cnn")
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            staged = stop.value
            break
    run = LiveRun()
    list(run.begin(staged))
    while not (isinstance(ev := run.step(), LatencyBatch) and ev.latencies_ns.size):
        pass
    timing = own_mmap()
    profiling = run.profile(2)
    next(profiling)  # the pass has begun (its marker)
    during = own_mmap()
    for _ in profiling:
        pass
    after = own_mmap()
    run.step()
    list(run.end())
    print(timing, during, after)
    """
)


def test_a_pass_mmaps_its_big_blocks_and_timing_reuses_its_own() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(DEMO_CNN)], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-2000:]
    timing, during, after = done.stdout.split()[-3:]
    assert timing == "False"  # glibc's own rule while timing: the heap grown for it
    assert during == "True"  # inside a pass: its own mmap (given back), the heap not grown
    assert after == "False"  # timing again: reused from the heap as before the pass
