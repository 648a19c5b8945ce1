"""Bandwidth roofs at each level of the memory hierarchy (a cache-aware roofline, as Intel
Advisor's and Nsight Compute's hierarchical rooflines draw them): for each cache level the
OS names, a working set sized to fit in it, and DRAM's far beyond the last level.

The kernel is one numpy reduction per thread: `sum(rows, axis=0)` over a view that repeats
one buffer R times (stride 0), so a single call streams R passes over a working set that
stays in the level measured, without numpy's per-call overhead (a microsecond) swamping a
pass over 16 KiB. Each pass reads the buffer and reads and writes the accumulator: 24 bytes
per element, counted as STREAM counts its triad. One thread per core the engine runs on,
each with its own buffers (numpy releases the GIL in the loop), best of `repeats`."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

from engine.machine.caches import CacheLevel
from engine.machine.measure_stop import check as check_stop

PASS_BYTES = 1.5e9  # bytes streamed per thread in one measurement (about 10-50 ms)
DRAM_MIN_BYTES = 256 * 2**20  # DRAM's working set: at least this, and 8x the last cache,
DRAM_MAX_BYTES = 2**30  # but never more than this (a CPU with a huge last-level cache)
MIN_ELEMENTS = 256


@dataclass(frozen=True)
class LevelRoof:
    name: str  # "L1", "L2", "L3", "DRAM"
    capacity: float  # bytes the level holds for the threads measured (inf for DRAM)
    gbps: float

    def to_json(self) -> dict[str, object]:
        cap = None if math.isinf(self.capacity) else int(self.capacity)
        return {"name": self.name, "bytes": cap, "gbps": round(self.gbps, 2)}


def stream_gbps(working_set: int, threads: int, repeats: int = 5) -> float:
    """Aggregate GB/s of `threads` threads, each streaming over `working_set` bytes."""
    import numpy as np
    from numpy.lib.stride_tricks import as_strided

    n = max(working_set // 16, MIN_ELEMENTS)  # two float64 arrays: buffer and accumulator
    passes = max(int(PASS_BYTES / (24 * n)), 2)
    bufs = [np.ones(n) for _ in range(threads)]
    outs = [np.zeros(n) for _ in range(threads)]
    rows = [as_strided(b, shape=(passes, n), strides=(0, b.itemsize), writeable=False)
            for b in bufs]  # fmt: skip

    def work(i: int) -> None:
        np.sum(rows[i], axis=0, out=outs[i])

    work(0)  # pages touched, code warm
    best = math.inf
    for _ in range(repeats):
        check_stop()
        workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
        t0 = time.perf_counter()
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        best = min(best, time.perf_counter() - t0)
    return 24.0 * n * passes * threads / best / 1e9


def level_roofs(levels: list[CacheLevel], threads: int, repeats: int = 5) -> list[LevelRoof]:
    """A roof per cache level, then DRAM's. Roofs never fall towards the core: data that
    fits in L1 streams at least as fast as the measured L2 rate (numpy's per-row overhead
    weighs on L1's short rows), so each level's roof is the best measured at it or beyond;
    a level no faster than DRAM (a cache too small to tell apart) is left out."""
    threads = max(threads, 1)
    roofs: list[LevelRoof] = []
    for level in levels:
        instances = math.ceil(threads / level.shared_by)  # of this level the threads use
        capacity = level.bytes * instances
        per_thread = capacity // threads // 2  # half: other data keeps its place too
        roofs.append(LevelRoof(level.name, capacity, stream_gbps(per_thread, threads, repeats)))
    last = roofs[-1].capacity if roofs else 0
    dram_set = int(min(max(DRAM_MIN_BYTES, 8 * last), DRAM_MAX_BYTES) // threads)
    dram = LevelRoof("DRAM", math.inf, stream_gbps(dram_set, threads, max(repeats // 2, 2)))
    kept: list[LevelRoof] = []
    beyond = dram.gbps
    for roof in reversed(roofs):
        beyond = max(beyond, roof.gbps)
        if roof.gbps > dram.gbps * 1.05:
            kept.insert(0, LevelRoof(roof.name, roof.capacity, beyond))
    return [*kept, dram]
