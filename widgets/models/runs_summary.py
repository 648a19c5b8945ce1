"""The runs table's data, apart from its view: one row per run of the live session (each
config, input size or resumed timing is a run), with p50, p99 and samples/s from its raw
samples, its cosine to FP32, and the change against a run pinned as the baseline.
Plain numpy, no Qt."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from engine.api import latency_stats, throughput

MAX_SAMPLES = 50_000  # per run, the newest: enough for a p99 of a long run


@dataclass
class _Run:
    label: str
    inputs: str
    batch: int
    model: str
    starts: list[npt.NDArray[np.float64]] = field(default_factory=list)  # ns
    lats: list[npt.NDArray[np.float64]] = field(default_factory=list)  # ns
    kept: int = 0  # samples held in starts/lats
    count: int = 0  # samples seen
    cosine: float | None = None
    final: tuple[int, float, float, float] | None = None  # count, p50, p99, samples/s
    running: bool = True
    failed: bool = False


@dataclass(frozen=True)
class RunRow:
    """One row as the table shows it (NaN: not known yet)."""

    index: int  # 0-based, in the order the runs started
    model: str  # the model file's name ('' when not known)
    label: str  # the config: "INT8 dynamic fusion=all batch=4 threads=2"
    inputs: str  # "input_ids 4x128"
    count: int
    p50_ms: float
    p99_ms: float
    samples_per_s: float
    cosine: float | None
    running: bool
    failed: bool
    baseline: bool
    d_p50: float  # % change of p50 against the baseline (NaN without one)
    d_p99: float
    d_samples_per_s: float


class RunsSummary:
    """Runs of one live session, fed from the engine's events, in order."""

    def __init__(self) -> None:
        self._runs: list[_Run] = []
        self.baseline: int | None = None

    def __len__(self) -> int:
        return len(self._runs)

    def start(self, label: str, inputs: str, batch: int, model: str = "") -> int:
        """A run began (RunStarted); the previous one, if still open, ends."""
        self.end()
        self._runs.append(_Run(label, inputs, max(int(batch), 1), model))
        return len(self._runs) - 1

    def serving(self, label: str, inputs: str) -> int:
        """The open run serves load (ServingStarted after its RunStarted): relabelled, its
        figures to come from the serving run's summary. An open run that already has
        samples ends, and the load run gets a row of its own."""
        run = self._open()
        if run is None or run.count or run.final is not None:
            return self.start(label, inputs, 1, run.model if run is not None else "")
        run.label, run.inputs, run.batch = label, inputs, 1
        return len(self._runs) - 1

    def add(self, starts_ns: npt.ArrayLike, latencies_ns: npt.ArrayLike) -> None:
        """Raw samples of the running run (absolute or relative starts, ns)."""
        run = self._open()
        if run is None:
            return
        s = np.asarray(starts_ns, dtype=np.float64).ravel()
        lat = np.asarray(latencies_ns, dtype=np.float64).ravel()
        if s.size == 0 or s.size != lat.size:
            return
        run.starts.append(s)
        run.lats.append(lat)
        run.kept += s.size
        run.count += s.size
        while run.kept - run.starts[0].size >= MAX_SAMPLES:  # the newest are kept
            run.kept -= run.starts.pop(0).size
            run.lats.pop(0)

    def set_cosine(self, cosine: float) -> None:
        run = self._open() or (self._runs[-1] if self._runs else None)
        if run is not None:
            run.cosine = float(cosine)

    def finish(self, count: int, p50_ms: float, p99_ms: float, samples_per_s: float) -> None:
        """The engine's statistics over every raw sample of the run (TimingDone)."""
        run = self._open()
        if run is not None and count > 0:
            run.final = (int(count), float(p50_ms), float(p99_ms), float(samples_per_s))

    def end(self, failed: bool = False) -> None:
        run = self._open()
        if run is not None:
            run.running = False
            run.failed = failed

    def pin(self, index: int | None) -> None:
        """Pin run `index` as the baseline (None: no baseline)."""
        if index is not None and not 0 <= index < len(self._runs):
            raise IndexError(f"no run {index}")
        self.baseline = index

    def rows(self) -> list[RunRow]:
        figures = [self._figures(r) for r in self._runs]
        base = figures[self.baseline] if self.baseline is not None else None
        out = []
        for i, (run, (count, p50, p99, rate)) in enumerate(zip(self._runs, figures, strict=True)):
            d = (
                tuple(_change(v, b) for v, b in zip((p50, p99, rate), base[1:], strict=True))
                if base is not None
                else (math.nan,) * 3
            )
            out.append(
                RunRow(
                    i,
                    run.model,
                    run.label,
                    run.inputs,
                    count,
                    p50,
                    p99,
                    rate,
                    run.cosine,
                    run.running,
                    run.failed,
                    i == self.baseline,
                    *d,
                )
            )
        return out

    def _open(self) -> _Run | None:
        return self._runs[-1] if self._runs and self._runs[-1].running else None

    @staticmethod
    def _figures(run: _Run) -> tuple[int, float, float, float]:
        if run.final is not None:
            return run.final
        if not run.kept:
            return 0, math.nan, math.nan, math.nan
        starts, lats = np.concatenate(run.starts), np.concatenate(run.lats)
        stats = latency_stats(lats.astype(np.int64))
        rate = throughput(starts.astype(np.int64), lats.astype(np.int64), run.batch)
        return run.count, stats.p50, stats.p99, rate.samples_per_s


def _change(value: float, base: float) -> float:
    """Percent change of `value` against `base` (NaN when either is unknown)."""
    if not (math.isfinite(value) and math.isfinite(base)) or base == 0:
        return math.nan
    return 100.0 * (value - base) / base
