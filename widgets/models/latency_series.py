"""The latency plot's data, apart from its view: per-inference samples in a bounded ring,
rolling p50/p90/p99 computed only for new samples, throughput in 0.5 s bins, and the
followed ranges' arithmetic. Plain numpy, no Qt: tested on its own (ndv's models/)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from widgets.models.ring_buffer import FloatArray, RingBuffer

T, LAT, P50, P90, P99 = range(5)  # the sample ring's columns
QUANTILES = (50.0, 90.0, 99.0)
BIN_S = 0.5  # throughput bin width
FOLLOW_STEP = 0.05  # the followed x range moves in steps of this share of the window
_CHUNK_ELEMENTS = 2_000_000  # bound on the temporary window copy np.percentile makes
_MAX_WINDOWS = 20_000  # rolling-percentile windows computed per update, at most
_NICE_STEPS = np.array([1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0])


def calm_top(current: float, needed: float) -> float:
    """A y-range top that holds still: kept while `needed` fits in its upper half, else
    the next round number at least 10% above `needed` (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8)."""
    if 0.5 * current <= needed <= current:
        return current
    target = needed * 1.1
    scale = 10.0 ** np.floor(np.log10(target))
    return float(_NICE_STEPS[np.searchsorted(_NICE_STEPS, target / scale - 1e-9)] * scale)


def follow_range(
    t0: float, t1: float, window_s: float, current: tuple[float, float], stepped: bool = True
) -> tuple[float, float]:
    """The x range that follows samples from t0 to t1, moving in steps rather than at
    every frame: while the samples span less than the window, it starts at t0 and widens
    through round spans (`calm_top`); after that it shows `window_s` seconds ending on the
    next multiple of FOLLOW_STEP of the window past the newest sample (plus a 1% margin),
    so it jumps forward by one step each time the data reaches its right edge.
    `stepped=False`: the last `window_s` seconds (at least 1 s) up to the newest sample
    plus the margin, moving with every frame."""
    span = max(t1 - t0, 0.0)
    margin = 0.01 * window_s
    if not stepped:
        x1 = t1 + margin
        return min(max(t0, x1 - window_s), x1 - 1.0), x1
    if span + margin < window_s:
        shown = current[1] - current[0] if current[0] == t0 else 0.0
        return t0, t0 + min(window_s, calm_top(shown, max(span + margin, 1.0)))
    step = FOLLOW_STEP * window_s
    x1 = math.ceil((t1 + margin) / step) * step
    return x1 - window_s, x1


class LatencySeries:
    """Samples (t, latency, p50, p90, p99) and throughput bins, bounded in memory."""

    def __init__(
        self, capacity: int = 300_000, percentile_window: int = 200, bins: int = 20_000
    ) -> None:
        if percentile_window < 1:
            raise ValueError(f"percentile_window must be >= 1, got {percentile_window}")
        self.percentile_window = min(percentile_window, capacity)
        self.buffer = RingBuffer(capacity, 5)  # t, latency, p50, p90, p99
        self._bins = RingBuffer(bins, 2)  # bin centre, samples/s
        self._open_bin: int | None = None  # index of the bin still filling
        self._open_sum = 0.0  # samples (batch x inferences) in it so far
        self._pct_total = 0  # samples (ever appended) whose percentiles are computed
        self._segment_total = 0  # samples appended before the running config's first
        self._starts: list[int] = [0]  # each config's first sample (global index), ascending
        self._batch = 1  # samples per inference of the latest append

    def __len__(self) -> int:
        return len(self.buffer)

    @property
    def total(self) -> int:
        """Samples ever appended (retained or dropped)."""
        return self.buffer.total

    def append(self, t_s: npt.ArrayLike, latency_ms: npt.ArrayLike, batch: int) -> bool:
        """Per-inference points: seconds since the session started (non-decreasing) and ms.
        Non-finite points are dropped; returns whether anything was added."""
        t = np.asarray(t_s, dtype=np.float64).ravel()
        lat = np.asarray(latency_ms, dtype=np.float64).ravel()
        if t.shape != lat.shape:
            raise ValueError(f"t_s and latency_ms differ in length: {t.size} vs {lat.size}")
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        finite = np.isfinite(t) & np.isfinite(lat)
        if not finite.all():
            t, lat = t[finite], lat[finite]
        if t.size == 0:
            return False
        last = self.buffer.view(T)[-1] if len(self.buffer) else -np.inf
        if t[0] < last or np.any(np.diff(t) < 0):
            raise ValueError("t_s must not decrease; call clear() before a new session")
        nan = np.nan
        self.buffer.append([t, lat, nan, nan, nan])
        self._batch = batch
        self._add_to_bins(t, batch)
        return True

    def clear(self) -> None:
        self.buffer.clear()
        self._bins.clear()
        self._open_bin, self._open_sum, self._pct_total = None, 0.0, 0
        self._segment_total, self._batch = 0, 1
        self._starts = [0]

    def start_segment(self) -> None:
        """A config change: the trailing windows (of `latest_stats` and of the rolling
        percentile lines) restart here, so they never mix a batch-1 run with a batch-16
        one."""
        self._segment_total = self.buffer.total
        if self._starts[-1] != self.buffer.total:
            self._starts.append(self.buffer.total)

    def samples(self) -> tuple[FloatArray, FloatArray]:
        """(t_s, latency_ms) retained, oldest first: views valid until the next append."""
        return self.buffer.view(T), self.buffer.view(LAT)

    def throughput(self) -> tuple[FloatArray, FloatArray]:
        """(bin centre s, samples/s) of the completed 0.5 s bins."""
        return self._bins.view(0), self._bins.view(1)

    def rolling_percentiles(self) -> FloatArray:
        """(3, n) trailing-window p50/p90/p99 per retained sample (as of the last update)."""
        return np.vstack([self.buffer.view(c) for c in (P50, P90, P99)])

    def latest_stats(self) -> dict[str, Any]:
        """count and p50/p90/p99 (ms) of the trailing window within the running config's
        samples, `segment` (how many it has), `samples_per_s` (batch x inferences per
        second over the window) and `span_s` (first to last sample of the window, s); NaN
        values when empty."""
        segment = self.buffer.total - self._segment_total
        n = min(self.percentile_window, segment, len(self.buffer))
        if n <= 0:
            return {"count": 0, "p50": np.nan, "p90": np.nan, "p99": np.nan,
                    "segment": 0, "samples_per_s": np.nan, "span_s": 0.0}  # fmt: skip
        lat = self.buffer.view(LAT)[-n:]
        t = self.buffer.view(T)[-n:]
        p50, p90, p99 = np.percentile(lat, QUANTILES)
        span = float(t[-1] - t[0])
        rate = self._batch * (n - 1) / span if n > 1 and span > 0 else np.nan
        return {
            "count": n,
            "p50": float(p50),
            "p90": float(p90),
            "p99": float(p99),
            "segment": int(segment),
            "samples_per_s": float(rate),
            "span_s": span,
        }

    def update_percentiles(self) -> None:
        """Rolling percentiles for the samples that arrived since the last paint only,
        each over the trailing window within its own config's samples."""
        n = len(self.buffer)
        first_global = self.buffer.total - n
        a = max(self._pct_total, first_global) - first_global
        self._pct_total = self.buffer.total
        if a >= n:
            return
        while len(self._starts) > 1 and self._starts[1] <= first_global:
            self._starts.pop(0)  # configs whose samples have all been dropped
        lat = self.buffer.view(LAT)
        out = np.empty((3, n - a))
        starts = [s - first_global for s in self._starts] + [n]
        for k in range(len(starts) - 1):
            lo, hi = max(a, starts[k]), starts[k + 1]
            if lo < hi:
                self._fill(lat, max(0, starts[k]), lo, hi, out[:, lo - a : hi - a])
        for row, col in enumerate((P50, P90, P99)):
            self.buffer.write(col, a, out[row])

    def _fill(self, lat: FloatArray, start: int, lo: int, hi: int, out: FloatArray) -> None:
        """Percentiles of samples lo..hi-1 (one config's, which began at `start`) into
        `out` (3, hi - lo): expanding windows from the start, then trailing ones."""
        w = self.percentile_window
        i = lo
        while i < min(hi, start + w - 1):  # a config's first samples: expanding windows
            out[:, i - lo] = np.percentile(lat[start : i + 1], QUANTILES)
            i += 1
        if i < hi:
            # Window r of `windows` ends at sample i + r. A burst of more than
            # _MAX_WINDOWS samples (a restored session) computes every stride-th window,
            # the newest always, and each sample takes the next computed value.
            windows = np.lib.stride_tricks.sliding_window_view(lat[i - w + 1 : hi], w)
            stride = -(-(hi - i) // _MAX_WINDOWS)
            first = (hi - i - 1) % stride
            ends = np.arange(i + first, hi, stride)
            values = np.empty((3, ends.size))
            chunk = max(1, _CHUNK_ELEMENTS // w)
            for c0 in range(0, ends.size, chunk):
                c1 = min(ends.size, c0 + chunk)
                rows = windows[first + c0 * stride : first + (c1 - 1) * stride + 1 : stride]
                values[:, c0:c1] = np.percentile(rows, QUANTILES, axis=1)
            if stride == 1:
                out[:, i - lo :] = values
            else:
                out[:, i - lo :] = values[:, np.searchsorted(ends, np.arange(i, hi))]

    def _add_to_bins(self, t: FloatArray, batch: int) -> None:
        """Count samples into 0.5 s bins; a bin is published once a later sample closes it."""
        ids = np.floor(t / BIN_S).astype(np.int64)
        if self._open_bin is None:
            self._open_bin, self._open_sum = int(ids[0]), 0.0
        rel = ids - self._open_bin
        last = int(rel[-1])
        if last > self._bins.capacity:  # a long pause: older bins would drop at once anyway
            shift = last - self._bins.capacity
            self._open_bin += shift
            self._open_sum = 0.0
            rel = rel[rel >= shift] - shift
            last -= shift
        counts = np.bincount(rel, minlength=last + 1).astype(np.float64) * batch
        counts[0] += self._open_sum
        if last > 0:
            centres = (self._open_bin + np.arange(last) + 0.5) * BIN_S
            self._bins.append([centres, counts[:last] / BIN_S])
        self._open_bin += last
        self._open_sum = float(counts[last])


def duration_text(seconds: float) -> str:
    """A window's length as read at a glance: "850 ms", "41.2 s", "4.1 min"."""
    if seconds < 1.0:
        return f"{seconds * 1e3:.0f} ms"
    if seconds < 120.0:
        return f"{seconds:.3g} s"
    return f"{seconds / 60:.3g} min"


def window_text(stats: dict[str, Any], total: int | None = None) -> str:
    """Which samples `latest_stats`'s figures are over, said beside them: "over the last
    200 inferences (41.2 s)", and with `total` (inferences retained) how many there are
    since the config change. The Runs table's figures are over whole runs. A generating
    model's stats say `unit` "generation": "over the last 12 generations (66 s)"."""
    count, segment = int(stats.get("count", 0)), int(stats.get("segment", 0))
    unit = str(stats.get("unit", "inference"))
    if count <= 0:
        return f"no {unit} yet"
    span = "" if count == 1 else f" ({duration_text(float(stats['span_s']))})"
    if count == 1:
        window = f"the only {unit}" if segment <= 1 else f"the last {unit}"
    elif count >= segment:
        window = f"all {count:,} {unit}s{span}"
    else:
        window = f"the last {count:,} {unit}s{span}"
    if total is None:
        return f"over {window}"
    since = " since the config change" if segment < total else ""
    of = f" of {segment:,}{since}" if count < segment else since
    return f"over {window}{of}"
