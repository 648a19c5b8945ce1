"""The live run's compact sample log: every sample kept in order, in fixed blocks, up to
its cap; the recent batches for a profiling pass's comparison stay bounded."""

from __future__ import annotations

import numpy as np
import pytest

from engine.run.sample_log import RECENT_BATCHES, SampleLog


def test_every_sample_comes_back_in_order_across_blocks() -> None:
    log = SampleLog(max_samples=10_000, block=64)
    starts = np.arange(1000, dtype=np.int64) * 10
    lats = np.arange(1000, dtype=np.int64) + 5
    for lo in range(0, 1000, 37):  # batches that straddle block edges
        log.append(starts[lo : lo + 37], lats[lo : lo + 37])
    s, lt = log.arrays()
    assert len(log) == 1000
    np.testing.assert_array_equal(s, starts)
    np.testing.assert_array_equal(lt, lats)
    assert log.nbytes == 16 * 64 * 16  # 16 blocks of 64 int64 pairs, nothing per batch


def test_full_at_its_cap() -> None:
    log = SampleLog(max_samples=100, block=32)
    one = np.ones(30, np.int64)
    for _ in range(3):
        log.append(one, one)
    assert not log.full
    log.append(one, one)
    assert log.full and len(log) == 120


def test_recent_batches_stay_bounded() -> None:
    log = SampleLog(block=16)
    for i in range(RECENT_BATCHES * 3):
        log.append(np.zeros(2, np.int64), np.full(2, i * 1_000_000, np.int64))
    assert len(log.recent) == RECENT_BATCHES
    last = np.arange(RECENT_BATCHES * 2, RECENT_BATCHES * 3)
    assert log.recent_mean_ms() == pytest.approx(last.mean())


def test_an_empty_log() -> None:
    log = SampleLog()
    s, lt = log.arrays()
    assert s.size == lt.size == 0 and log.recent_mean_ms() is None
    with pytest.raises(ValueError):
        log.append(np.zeros(2, np.int64), np.zeros(3, np.int64))
