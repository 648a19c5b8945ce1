"""The live run's sample log: every latency kept in order up to its cap, with one block in
memory and the full ones in a temporary file that has no name on disk; no usable temp dir
or a full disk keeps them in memory instead, said in one line; the recent batches for a
profiling pass's comparison stay bounded."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from engine.run.sample_log import RECENT_BATCHES, SampleLog

ROOT = Path(__file__).resolve().parents[1]


def _feed(log: SampleLog, n: int, size: int = 37) -> tuple[np.ndarray, np.ndarray]:
    """n samples in batches of `size` (straddling block edges); what was fed."""
    starts = np.arange(n, dtype=np.int64) * 10 + 3
    lats = (np.arange(n, dtype=np.int64) * 7919) % 1000 + 5
    for lo in range(0, n, size):
        log.append(starts[lo : lo + size], lats[lo : lo + size])
    return starts, lats


def test_every_latency_comes_back_in_order_across_blocks(tmp_path: Path) -> None:
    log = SampleLog(max_samples=10_000, block=64, spill_dir=str(tmp_path))
    starts, lats = _feed(log, 1000)
    assert len(log) == 1000
    np.testing.assert_array_equal(log.latencies(), lats)
    np.testing.assert_array_equal(log.latencies(), lats)  # read back again: the same
    assert log.first_start_ns == starts[0] and log.last_end_ns == starts[-1] + lats[-1]
    assert log.spilled == 960 and log.problem is None  # 15 full blocks in the file
    assert log.nbytes == 64 * 8  # in memory: the block being filled, nothing per batch
    log.close()


def test_memory_stays_one_block_however_many_samples(tmp_path: Path) -> None:
    """A run's samples cost the host no memory as they grow (issue 54): 200 blocks go
    through, and what the log allocates stays one block."""
    log = SampleLog(max_samples=10**7, block=4096, spill_dir=str(tmp_path))
    batch = np.arange(1024, dtype=np.int64)
    tracemalloc.start()
    try:
        for _ in range(RECENT_BATCHES + 8):  # the recent batches' deque full, a block made
            log.append(batch, batch)
        before = tracemalloc.take_snapshot()
        for _ in range(800):  # 200 blocks of 4096
            log.append(batch, batch)
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    mine = [tracemalloc.Filter(True, "*sample_log.py")]
    grown = sum(d.size_diff for d in after.filter_traces(mine).compare_to(
        before.filter_traces(mine), "filename"))  # fmt: skip
    assert grown < 4096 * 8, f"the log grew {grown:,} bytes over 200 blocks"
    assert log.nbytes == 4096 * 8 and log.spilled >= 200 * 4096
    assert len(log.latencies()) == (RECENT_BATCHES + 808) * 1024
    log.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fd")
def test_the_temporary_file_has_no_name_and_goes_with_the_log(tmp_path: Path) -> None:
    """Nothing in the temp dir while the file is written (unlinked as it was made): the
    file cannot outlive the process, however it ends."""

    def open_there() -> list[str]:
        links = []
        for fd in os.listdir("/proc/self/fd"):
            try:
                links.append(os.readlink(f"/proc/self/fd/{fd}"))
            except OSError:
                continue
        return [link for link in links if link.startswith(str(tmp_path))]

    log = SampleLog(block=64, spill_dir=str(tmp_path))
    _feed(log, 500)
    assert log.spilled == 448
    assert os.listdir(tmp_path) == []
    held = open_there()
    assert len(held) == 1 and held[0].endswith("(deleted)")
    log.close()
    assert open_there() == []


def test_an_unusable_temp_dir_keeps_the_samples_in_memory_in_one_line(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("not a folder")
    log = SampleLog(max_samples=2000, block=64, spill_dir=str(not_a_dir))
    _, lats = _feed(log, 1000)
    np.testing.assert_array_equal(log.latencies(), lats)
    assert log.spilled == 0 and log.nbytes == 16 * 64 * 8  # in memory, as before
    assert log.problem is not None and "\n" not in log.problem
    assert str(not_a_dir) in log.problem and "Not a directory" in log.problem


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE, SIGXFSZ")
def test_a_full_disk_mid_run_keeps_every_sample(tmp_path: Path) -> None:
    """The file may take no more than 2.5 blocks (the kernel's own limit on file size, as a
    full disk stops a write part way): the third block's write fails half done, and every
    sample still comes back in order, the first two blocks from the file."""
    script = textwrap.dedent(f"""
        import resource, signal, sys
        import numpy as np
        sys.path.insert(0, {str(ROOT)!r})
        from engine.run.sample_log import SampleLog
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(2.5 * 64 * 8), resource.RLIM_INFINITY))
        log = SampleLog(max_samples=10_000, block=64, spill_dir={str(tmp_path)!r})
        lats = (np.arange(1000, dtype=np.int64) * 7919) % 1000 + 5
        for lo in range(0, 1000, 37):
            log.append(lats[lo : lo + 37], lats[lo : lo + 37])
        assert (log.latencies() == lats).all(), "samples lost or out of order"
        print(log.spilled, log.nbytes)
        print(log.problem)
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    counts, problem = done.stdout.strip().splitlines()
    assert counts == f"{2 * 64} {14 * 64 * 8}"  # 2 blocks in the file, 13 kept + 1 filling
    assert "File too large" in problem and str(tmp_path) in problem


def test_a_file_that_cannot_be_read_back_says_what_the_summary_is_of(tmp_path: Path) -> None:
    log = SampleLog(block=64, spill_dir=str(tmp_path))
    _, lats = _feed(log, 500)
    log.close()  # the file gone before the summary read it
    np.testing.assert_array_equal(log.latencies(), lats[448:])
    assert log.problem is not None
    assert "the first 448 of this run's 500 samples could not be read back" in log.problem
    assert "summary is of the other 52" in log.problem


def test_full_at_its_cap() -> None:
    log = SampleLog(max_samples=100, block=32)
    one = np.ones(30, np.int64)
    for _ in range(3):
        log.append(one, one)
    assert not log.full
    log.append(one, one)
    assert log.full and len(log) == 120
    log.close()


def test_recent_batches_stay_bounded() -> None:
    log = SampleLog(block=16, spill=False)
    for i in range(RECENT_BATCHES * 3):
        log.append(np.zeros(2, np.int64), np.full(2, i * 1_000_000, np.int64))
    assert len(log.recent) == RECENT_BATCHES
    last = np.arange(RECENT_BATCHES * 2, RECENT_BATCHES * 3)
    assert log.recent_mean_ms() == pytest.approx(last.mean())


def test_an_empty_log() -> None:
    log = SampleLog()
    assert log.latencies().size == 0 and log.recent_mean_ms() is None
    log.append(np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert len(log) == 0 and log.nbytes == 0
    with pytest.raises(ValueError):
        log.append(np.zeros(2, np.int64), np.zeros(3, np.int64))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_the_block_is_resident_at_once_not_page_by_page(tmp_path: Path) -> None:
    """The process's resident size does not creep up as the block fills (a soak's RSS
    slope would read it as growth): its pages are touched when it is made."""

    def rss() -> int:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    log = SampleLog(block=1 << 20, spill_dir=str(tmp_path))  # 8 MiB
    data = np.arange(1 << 20, dtype=np.int64)
    log.append(data[:1], data[:1])
    before = rss()
    for lo in range(1, (1 << 20) - 1024, 1024):
        log.append(data[lo : lo + 1024], data[lo : lo + 1024])
    grown = rss() - before
    assert grown < 2 << 20, f"resident size grew {grown:,} bytes as the block filled"
    log.close()
