"""A live run's raw samples kept compactly: (start, latency) int64 pairs in fixed blocks.

The live engine sums a run up from every one of its samples when the run ends, so it has
to keep them; as int64 pairs in blocks that is 16 bytes a sample, with no per-batch
objects and no copying as it grows. `full` says when a run has reached its cap (the host
then closes it and continues the config in a new run), so a day of live work stays
bounded.
"""

from __future__ import annotations

from collections import deque

import numpy as np

BLOCK = 65_536  # samples per block: 1 MiB
MAX_SAMPLES = 1_000_000  # a run's cap: 16 MB, about 1.7 hours at 160 inferences/s
RECENT_BATCHES = 50  # batches (about 5 s) whose mean latency a profiling pass compares to


class SampleLog:
    """Append batches of (starts_ns, latencies_ns); read them back whole."""

    def __init__(self, max_samples: int = MAX_SAMPLES, block: int = BLOCK) -> None:
        if max_samples < 1 or block < 1:
            raise ValueError("max_samples and block must be >= 1")
        self.max_samples = max_samples
        self._block = block
        self._blocks: list[np.ndarray] = []  # each (2, block) int64: starts, latencies
        self._n = 0
        self.recent: deque[np.ndarray] = deque(maxlen=RECENT_BATCHES)

    def __len__(self) -> int:
        return self._n

    @property
    def full(self) -> bool:
        return self._n >= self.max_samples

    @property
    def nbytes(self) -> int:
        """Memory the blocks take (allocated; pages are touched as they fill)."""
        return sum(b.nbytes for b in self._blocks)

    def append(self, starts_ns: np.ndarray, latencies_ns: np.ndarray) -> None:
        if starts_ns.shape != latencies_ns.shape:
            raise ValueError("starts and latencies differ in length")
        k, done = int(latencies_ns.size), 0
        if k:
            self.recent.append(np.array(latencies_ns, dtype=np.int64))
        while done < k:
            at = self._n % self._block
            if at == 0 and self._n // self._block == len(self._blocks):
                self._blocks.append(np.empty((2, self._block), np.int64))
            block = self._blocks[self._n // self._block]
            take = min(k - done, self._block - at)
            block[0, at : at + take] = starts_ns[done : done + take]
            block[1, at : at + take] = latencies_ns[done : done + take]
            done += take
            self._n += take

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(starts_ns, latencies_ns), every sample in order (a copy)."""
        if not self._n:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        both = np.concatenate(self._blocks, axis=1)[:, : self._n]
        return both[0].copy(), both[1].copy()

    def recent_mean_ms(self) -> float | None:
        """Mean latency (ms) of the last RECENT_BATCHES batches; None before any."""
        if not self.recent:
            return None
        return float(np.concatenate(list(self.recent)).mean() / 1e6)
