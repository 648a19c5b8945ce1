"""The window's reader side of a profiling pass holds no C memory per pass (stop 63, h3).

The live soaks (Profile Now every 4 s) saw the window's malloc in use grow ~14 KB a pass,
and the drawing was cleared of it (op table, roofline, figures: < 1 KB a pass). What the
reader thread does with a pass besides is decode it off the wire (engine/run/wire.py) and
record it (engine/session/recorder.py into SQLite). Measured alone, in process, on real
passes of the demo transformer (bench/pass_memory.py, bench/results/pass_memory.md):
decoding keeps +0.00 KB a pass; recording grows only while SQLite's page cache fills to its
cap (cache_size's 2,000 KiB: ~1.9 MB over the first 20-40 passes), then +0.01 KB a pass.

These keep it so, with a real profiling pass (ONNX Runtime's profiler on the demo model,
fewer inferences than the window's 20 so the test is quick), encoded as the host sends it:
after a few passes to settle, many more leave malloc in use, Python's traced memory and
SQLite's own memory outside its page cache where they were (a margin of ~1 KB a pass,
far under the soaks' 14 KB). The test's store has a smaller page cache (CACHE_KIB), so it
is full within the settling passes; the window's is SQLite's default. Checked by hand to
fail on a leak per pass: 14 KB of C memory a decoded message or a recorded pass (malloc
+1.7 MB, +250 KB over 24 passes), each OpProfile kept (Python +4.3 MB), a connection a
pass left open (malloc +3.1 MB), each decoded message kept (malloc +50 KB)."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.rss import malloc_in_use
from engine.backends.ort.profiler import profile_pass
from engine.config import RunConfig
from engine.events import Event, LatencyBatch, Marker, OpProfile, RunStarted, Telemetry
from engine.model.info import load_model
from engine.model.inputs import generate_inputs, plan_inputs
from engine.run.load_window import with_load
from engine.run.wire import decode, encode
from engine.session.recorder import Recorder
from engine.session.store import SessionStore

DEMO = Path(__file__).resolve().parents[1] / "resources" / "models" / "demo_transformer.onnx"
SETTLE = 6  # passes before measuring (caches, the page cache's cap, the allocator's lists)
PASSES = 24  # measured
MARGIN = PASSES * 1024  # ~1 KB a pass (the soaks' growth: ~14 KB a pass)
CACHE_KIB = 64  # the test store's page cache cap, so it fills within SETTLE passes

if malloc_in_use() < 0:
    pytest.skip("needs glibc's mallinfo2", allow_module_level=True)

_SQLITE_STATUS_MEMORY_USED = 0
_SQLITE_STATUS_PAGECACHE_OVERFLOW = 2  # no page-cache buffer is configured: every page


def _sqlite() -> ctypes.CDLL | None:
    """The SQLite library Python's sqlite3 uses (a shared library on Linux), for its own
    memory counters; None where it is linked in statically."""
    import _sqlite3

    name = ctypes.util.find_library("sqlite3")
    lib = ctypes.CDLL(_sqlite3.__file__)
    if not hasattr(lib, "sqlite3_status64"):
        if name is None:
            return None
        lib = ctypes.CDLL(name)
    lib.sqlite3_status64.argtypes = [
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_int64),
        ctypes.POINTER(ctypes.c_int64),
        ctypes.c_int,
    ]
    return lib


def _status(lib: ctypes.CDLL, op: int) -> int:
    cur, high = ctypes.c_int64(), ctypes.c_int64()
    assert lib.sqlite3_status64(op, ctypes.byref(cur), ctypes.byref(high), 0) == 0
    return cur.value


@pytest.fixture(scope="module")
def pass_messages() -> list[bytes]:
    """One real profiling pass, message by message as the host's outbox sends it (each
    event of a pass is flushed at once: a marker, progress, then the OpProfile)."""
    model, info = load_model(DEMO)
    feeds = generate_inputs(model, info, plan_inputs(info, 1), 0)
    events: list[Event] = [Marker("profile", "profiling", time.perf_counter_ns())]
    events += with_load(profile_pass(DEMO, RunConfig(threads=1), feeds, runs=1))
    profiles = [e for e in events if isinstance(e, OpProfile)]
    assert len(profiles) == 1 and len(profiles[0].trace.nodes) > 100  # a real pass
    return [encode([e]) for e in events]


def _grown(one_pass: Callable[[], None], *measures: Callable[[], int]) -> list[int]:
    """How much each measure grew over PASSES passes, after SETTLE."""
    for _ in range(SETTLE):
        one_pass()
    gc.collect()
    first = [m() for m in measures]
    for _ in range(PASSES):
        one_pass()
    gc.collect()
    return [m() - f for m, f in zip(measures, first, strict=True)]


def _traced() -> int:
    return tracemalloc.get_traced_memory()[0]


def _python_grown(one_pass: Callable[[], None]) -> int:
    """Python's allocations (tracemalloc) kept over PASSES passes (its own bookkeeping
    goes through malloc: measured apart from malloc in use)."""
    tracemalloc.start()
    try:
        return _grown(one_pass, _traced)[0]
    finally:
        tracemalloc.stop()


def test_decoding_profiling_passes_keeps_nothing_per_pass(pass_messages: list[bytes]) -> None:
    def one_pass() -> None:
        for raw in pass_messages:
            decode(raw)

    (c_memory,) = _grown(one_pass, malloc_in_use)
    python = _python_grown(one_pass)
    assert c_memory < MARGIN, f"malloc in use +{c_memory:,} bytes over {PASSES} passes"
    assert python < MARGIN, f"Python's allocations +{python:,} bytes over {PASSES} passes"


def test_recording_profiling_passes_keeps_nothing_per_pass_past_the_page_cache(
    pass_messages: list[bytes], tmp_path: Path
) -> None:
    lib = _sqlite()
    store = SessionStore.create_or_open(tmp_path / "s.opscope")
    store.db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    rec = Recorder(store, kind="live")
    started = RunStarted(RunConfig(threads=1), "cpu", "CPUExecutionProvider",
                         ("CPUExecutionProvider",), {"x": ((1, 8), "float")}, 1, 0.1)  # fmt: skip
    rec.feed(started)
    k = [0]

    def one_pass() -> None:
        """The window's sink: timing's samples between passes, then a pass freshly
        decoded (as the reader thread hands each one on), then a commit."""
        import numpy as np

        k[0] += 1
        starts = np.arange(50, dtype=np.int64) * 1_000 + k[0] * 10**6
        rec.feed(LatencyBatch(starts, np.full(50, 900_000, np.int64), origin_ns=1))
        rec.feed(Telemetry(time.perf_counter_ns(), {"cpu_util": 50.0}))
        for raw in pass_messages:
            rec.feed_many(decode(raw))
        rec.flush()

    def outside_cache() -> int:
        """SQLite's own memory, less its page cache (bounded by cache_size)."""
        if lib is None:
            return 0
        used = _status(lib, _SQLITE_STATUS_MEMORY_USED)
        return used - _status(lib, _SQLITE_STATUS_PAGECACHE_OVERFLOW)

    try:
        c_memory, sqlite = _grown(one_pass, malloc_in_use, outside_cache)
        python = _python_grown(one_pass)
    finally:
        rec.close()
        store.close()
    assert c_memory < MARGIN, f"malloc in use +{c_memory:,} bytes over {PASSES} passes"
    assert sqlite < MARGIN, f"SQLite outside its page cache +{sqlite:,} bytes"
    assert python < MARGIN, f"Python's allocations +{python:,} bytes over {PASSES} passes"
