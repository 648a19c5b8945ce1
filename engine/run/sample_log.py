"""A live run's raw latencies, every one kept in order for its summary, with no more than one
block of them in memory.

The live engine sums a run up from every one of its samples when the run ends (percentiles,
stability), so every latency is kept. Their starts are not: the summary needs only the run's
first start and last end (its throughput), kept as two numbers. The block being filled is in
memory (128 KiB, its pages touched when it is made, so the host's resident size does not
creep up as it fills); each full block is written to a temporary file with plain writes, and
the run is read back from it once, at its end. The file has no name on disk (unlinked as it is
made): it ends with the run, or with the host however the host ends, and leaves nothing
behind. So the host's memory stays flat through an hour-long run, where keeping the samples
grew it 16 bytes a sample (16 MB at the cap, issue 54). What the window records is not
touched: every batch goes out as before, this log only serves the host's own summary.

Where no temporary file can be made or written (no usable temp dir, a full disk), the blocks
stay in memory as they did before, bounded by the cap, and `problem` says why in one line
(once). `full` says when a run has reached its cap (the host then closes it and continues
the config in a new run), so a day of live work stays bounded either way.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections import deque
from typing import BinaryIO

import numpy as np

BLOCK = 16_384  # latencies per block: 128 KiB in memory, one write to the file when full
MAX_SAMPLES = 1_000_000  # a run's cap: about 1.7 hours at 160 inferences/s
RECENT_BATCHES = 50  # batches (about 5 s) whose mean latency a profiling pass compares to
SAMPLE_BYTES = 8  # one int64 latency


class SampleLog:
    """Append batches of (starts_ns, latencies_ns); read the latencies back whole, in order.

    `spill_dir`: where the temporary file is made (None: the system's temp dir, $TMPDIR);
    `spill=False` keeps every block in memory."""

    def __init__(
        self,
        max_samples: int = MAX_SAMPLES,
        block: int = BLOCK,
        spill_dir: str | None = None,
        spill: bool = True,
    ) -> None:
        if max_samples < 1 or block < 1:
            raise ValueError("max_samples and block must be >= 1")
        self.max_samples = max_samples
        self._size = block
        self._block = np.empty(0, np.int64)  # the block being filled (allocated at need)
        self._at = 0  # samples in it
        self._kept: list[np.ndarray] = []  # full blocks held in memory (no file to take them)
        self._file: BinaryIO | None = None
        self._spilled = 0  # samples in the file: whole blocks, in order, from its start
        self._spill, self._spill_dir = spill, spill_dir
        self._n = 0
        self.first_start_ns = 0  # the run's first start and last end (from its origin)
        self.last_end_ns = 0
        self.problem: str | None = None  # why samples stay in memory or were lost, one line
        self.recent: deque[np.ndarray] = deque(maxlen=RECENT_BATCHES)

    def __len__(self) -> int:
        return self._n

    @property
    def full(self) -> bool:
        return self._n >= self.max_samples

    @property
    def nbytes(self) -> int:
        """Memory the samples take here: the block being filled, and any kept in memory."""
        return self._block.nbytes + sum(b.nbytes for b in self._kept)

    @property
    def spilled(self) -> int:
        """Samples in the temporary file."""
        return self._spilled

    def append(self, starts_ns: np.ndarray, latencies_ns: np.ndarray) -> None:
        if starts_ns.shape != latencies_ns.shape:
            raise ValueError("starts and latencies differ in length")
        k, done = int(latencies_ns.size), 0
        if not k:
            return
        self.recent.append(np.array(latencies_ns, dtype=np.int64))
        if not self._n:
            self.first_start_ns = int(starts_ns[0])
        self.last_end_ns = int(starts_ns[-1]) + int(latencies_ns[-1])
        while done < k:
            if not self._block.size:
                self._block = np.empty(self._size, np.int64)
                self._block.fill(0)  # resident now, not page by page over minutes
            take = min(k - done, self._size - self._at)
            self._block[self._at : self._at + take] = latencies_ns[done : done + take]
            done += take
            self._at += take
            self._n += take
            if self._at == self._size:
                self._block_full()

    def latencies(self) -> np.ndarray:
        """Every latency in order (a new array; the file read back once). If the file's part
        cannot be read back, the rest, with `problem` saying how many were lost."""
        out = np.empty(self._n, np.int64)
        at = 0
        if self._spilled:
            try:
                self._read_into(out[: self._spilled])
                at = self._spilled
            except OSError as exc:
                self.problem = (
                    f"the first {self._spilled:,} of this run's {self._n:,} samples could not be "
                    f"read back from its temporary file ({_why(exc)}): its latency summary is of "
                    f"the other {self._n - self._spilled:,}"
                )
                out = out[self._spilled :]
        for part in (*self._kept, self._block[: self._at]):
            out[at : at + part.size] = part
            at += part.size
        return out

    def close(self) -> None:
        """The run ended: its file closed (and so gone). The samples in memory stay."""
        if self._file is not None:
            f, self._file = self._file, None
            with contextlib.suppress(OSError):  # nothing was to be written: only read
                f.close()

    def recent_mean_ms(self) -> float | None:
        """Mean latency (ms) of the last RECENT_BATCHES batches; None before any."""
        if not self.recent:
            return None
        return float(np.concatenate(list(self.recent)).mean() / 1e6)

    # the file ---------------------------------------------------------------------------
    def _block_full(self) -> None:
        if self._spill and self.problem is None:
            try:
                if self._file is None:
                    self._file = _temporary_file(self._spill_dir)
                self._file.seek(self._spilled * SAMPLE_BYTES)
                _write_all(self._file, self._block)
                self._spilled += self._block.size
                self._at = 0  # the same block is filled again
                return
            except OSError as exc:
                self._stop_spilling(exc)
        self._kept.append(self._block)
        self._block = np.empty(0, np.int64)
        self._at = 0

    def _stop_spilling(self, exc: OSError) -> None:
        where = self._spill_dir or _temp_dir()
        mb = self.max_samples * SAMPLE_BYTES / 1e6
        self.problem = (
            f"live samples: no temporary file could be written in {where} ({_why(exc)}); "
            f"this run's samples stay in memory (at most {mb:.1f} MB a run)"
        )
        if not self._spilled:
            self.close()

    def _read_into(self, out: np.ndarray) -> None:
        if self._file is None:
            raise OSError(errno.EBADF, "the temporary file is closed")
        view = out.data.cast("B")
        self._file.seek(0)
        done = 0
        while done < len(view):
            n = self._file.readinto(view[done:])  # type: ignore[attr-defined]
            if not n:
                raise OSError(errno.EIO, f"it ended after {done:,} of {len(view):,} bytes")
            done += n


def _temporary_file(where: str | None) -> BinaryIO:
    """A file with no name on disk (O_TMPFILE, or made and unlinked at once; on Windows,
    deleted by the system when its handle closes), unbuffered: plain writes."""
    return tempfile.TemporaryFile(dir=where, prefix="opscope-samples-", buffering=0)


def _write_all(f: BinaryIO, block: np.ndarray) -> None:
    view = block.data.cast("B")
    done = 0
    while done < len(view):
        n = f.write(view[done:])
        if not n:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        done += n


def _temp_dir() -> str:
    try:
        return tempfile.gettempdir()
    except OSError:  # no usable temp dir at all
        return "the temp dir"


def _why(exc: OSError) -> str:
    """An OSError in words, without the errno number's noise."""
    if exc.strerror:
        return f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    return str(exc) or type(exc).__name__
