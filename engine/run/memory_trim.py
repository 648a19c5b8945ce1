"""Hand the C allocator's free memory back to the OS at intervals (glibc's `malloc_trim`).

A long live run frees as much as it allocates (numpy batches, Qt and pyqtgraph buffers,
SQLite pages), but glibc keeps freed memory inside its heap and per-thread arenas, so a
process's resident size can creep up over hours with nothing leaked. `malloc_trim(0)`
returns every free page of every arena to the OS.

The window trims every `WINDOW_EVERY_S` by default: over a soak's hour its RSS grew
+0.070 MB/min untrimmed with malloc's bytes in use flat; trimmed every 60 s, +0.023
MB/min, levelling off (+0.003 in the hour's second half), 0.4 ms a trim
(bench/results/soak.md). The engine host does not by default: its heap was flat over an
hour without it, and a trim holds each arena's lock while it walks it, a stall the host's
timed runs must not see. `OPSCOPE_MALLOC_TRIM_S` (seconds between trims) in the environment
sets either process's interval, 0 turning the window's off (the host, a spawned child,
inherits it). With `OPSCOPE_MALLOC_TRIM_LOG` naming a file, each trim appends one
tab-separated line: pid, wall time, RSS before and after (bytes), malloc_trim's result (1:
memory given back) and the trim's own duration (s). Where there is no glibc (macOS,
Windows, musl) nothing starts.

And `big_blocks_mmapped`: a profiling pass's big blocks kept out of the heap (below).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping

EVERY_ENV = "OPSCOPE_MALLOC_TRIM_S"
LOG_ENV = "OPSCOPE_MALLOC_TRIM_LOG"
WINDOW_EVERY_S = 60.0  # the window's default (the host's is 0: none)

TrimFn = Callable[[int], int]

_started: Trimmer | None = None  # one trimmer per process
_lock = threading.Lock()


def glibc() -> ctypes.CDLL | None:
    """This process's glibc, or None where it has none (macOS, Windows, musl)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.gnu_get_libc_version  # noqa: B018  (glibc only: musl lacks it)
    except (OSError, AttributeError):
        return None
    return libc


def glibc_malloc_trim() -> TrimFn | None:
    """glibc's `malloc_trim`, or None where this process has no glibc."""
    libc = glibc()
    if libc is None:
        return None
    trim = libc.malloc_trim
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


def resident_bytes() -> int:
    """This process's resident set size in bytes (0 when unreadable)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class Trimmer:
    """Calls `trim(0)` every `every_s` seconds on a daemon thread of its own."""

    def __init__(self, trim: TrimFn, every_s: float, log_path: str | None = None) -> None:
        self._trim = trim
        self.every_s = every_s
        self.log_path = log_path
        self.trims = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="opscope-malloc-trim", daemon=True)

    def trim_once(self) -> tuple[int, int, int]:
        """Trim now; returns RSS before and after (bytes) and malloc_trim's result. A log
        line is written and flushed as each trim ends (kept if the process is killed)."""
        before = resident_bytes()
        t0 = time.perf_counter()
        released = int(self._trim(0))
        took = time.perf_counter() - t0
        after = resident_bytes()
        self.trims += 1
        if self.log_path:
            with contextlib.suppress(OSError), open(self.log_path, "a") as fh:
                fields = (os.getpid(), f"{time.time():.3f}", before, after, released, f"{took:.6f}")
                fh.write("\t".join(map(str, fields)) + "\n")
        return before, after, released

    def start(self) -> Trimmer:
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.trim_once()


def every_from(environ: Mapping[str, str], default_s: float = 0.0) -> float:
    """Seconds between trims asked for in `environ`, `default_s` where it asks nothing; 0
    (none) where it says 0 or what is not a positive number."""
    asked = environ.get(EVERY_ENV, "").strip()
    if not asked:
        return default_s
    try:
        every = float(asked)
    except ValueError:
        return 0.0
    return every if every > 0 and every == every and every != float("inf") else 0.0


def start_from_env(
    environ: Mapping[str, str] | None = None,
    find_trim: Callable[[], TrimFn | None] = glibc_malloc_trim,
    default_s: float = 0.0,
) -> Trimmer | None:
    """Start this process's trimmer, every `default_s` unless `OPSCOPE_MALLOC_TRIM_S` says
    otherwise, where glibc is here; the one already running otherwise (None: none runs)."""
    global _started
    env = os.environ if environ is None else environ
    every = every_from(env, default_s)
    with _lock:
        if _started is not None or every <= 0:
            return _started
        trim = find_trim()
        if trim is None:
            return None
        _started = Trimmer(trim, every, env.get(LOG_ENV) or None).start()
        return _started


def start_for_window(environ: Mapping[str, str] | None = None) -> Trimmer | None:
    """The window's trimmer: every `WINDOW_EVERY_S` unless `OPSCOPE_MALLOC_TRIM_S` says
    otherwise (why the window and not the host: the module's note)."""
    return start_from_env(environ, default_s=WINDOW_EVERY_S)


# glibc's malloc serves a block of its mmap threshold or more with an mmap of its own,
# given back to the OS when freed. By default each such block freed raises the threshold
# to its size (up to 32 MiB): a profiling pass frees megabytes of them (its session, its
# profile's text), so every later pass grew the main heap for its big blocks, and a small
# block left above them kept the heap from shrinking back: the host's `[heap]` grew ~1 MB
# at a time with its passes (+2.1 MB over a soak's hour), none of it with its samples
# (bench/results/host_heap.md). So a pass runs with the threshold at glibc's default, and
# timing with it at glibc's ceiling, as its own rule had it after a pass: a run's big output
# is reused from the heap, not mmapped and faulted in again each run (held at 128 KiB, a
# 1 MiB Relu timed 7% slower).
PASS_MMAP_THRESHOLD = 128 * 1024
TIMING_MMAP_THRESHOLD = 32 * 1024 * 1024
_M_MMAP_THRESHOLD = -3  # mallopt's parameter (malloc.h)


def mmap_threshold(nbytes: int) -> bool:
    """Set glibc's mmap threshold (which then no longer moves by itself); True where set,
    False without glibc."""
    libc = glibc()
    if libc is None:
        return False
    mallopt = libc.mallopt
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, nbytes))


@contextlib.contextmanager
def big_blocks_mmapped() -> Iterator[None]:
    """Inside (a profiling pass): a block of 128 KiB or more that the heap's free memory
    cannot serve is an mmap of its own, given back when freed, not the heap grown for it;
    after: glibc's ceiling again, for timing (why: the note above PASS_MMAP_THRESHOLD)."""
    mmap_threshold(PASS_MMAP_THRESHOLD)
    try:
        yield
    finally:
        mmap_threshold(TIMING_MMAP_THRESHOLD)
