"""The runs table's data, apart from its view: one row per run of the live session (each
config, input size or resumed timing is a run), with p50, p99 (and their intervals) and
samples/s from its raw samples, its cosine to FP32, how busy the machine was, and the
change against a run pinned as the baseline, with whether that change is a result: the
runs are like for like and quiet, and the intervals separate (engine/analysis/likeness.py).
Plain numpy, no Qt."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from engine.api import Contention, Side, combine, latency_stats, separated, throughput, unlike

MAX_SAMPLES = 50_000  # per run, the newest: enough for a p99 of a long run
SLACK = MAX_SAMPLES // 4  # room past the cap, so the newest move to the front seldom
Interval = tuple[float, float] | None


class _Samples:
    """A run's newest raw samples (at most MAX_SAMPLES): starts and latencies (ns) as two
    rows of one float64 array, grown by doubling, the oldest dropped past the cap. Kept as
    a list of each batch's two arrays, they took 20x the samples' own 16 B where a batch
    holds a sample or two (a busy machine's): an ndarray object (pymalloc) and a data and
    shape block (malloc) for each, 31 MB at the cap, reached only after most of an hour,
    so the window's memory grew all that hour (issue 54 soak)."""

    def __init__(self) -> None:
        self._data: npt.NDArray[np.float64] = np.empty((2, 0))
        self._lo = 0  # the live samples are columns lo:hi
        self._hi = 0

    def __len__(self) -> int:
        return self._hi - self._lo

    @property
    def nbytes(self) -> int:
        return int(self._data.nbytes)

    def add(self, starts: npt.NDArray[np.float64], lats: npt.NDArray[np.float64]) -> None:
        k = min(starts.size, MAX_SAMPLES)
        starts, lats = starts[starts.size - k :], lats[lats.size - k :]
        if self._hi + k > self._data.shape[1]:
            keep = min(len(self), MAX_SAMPLES - k)  # the newest, with the batch: the cap
            size = self._data.shape[1]
            if keep + k > size:  # doubling up to the cap and its slack
                size = min(max(2 * size, 1024, keep + k), MAX_SAMPLES + SLACK)
            data = np.empty((2, size)) if size != self._data.shape[1] else self._data
            data[:, :keep] = self._data[:, self._hi - keep : self._hi]
            self._data, self._lo, self._hi = data, 0, keep
        self._data[0, self._hi : self._hi + k] = starts
        self._data[1, self._hi : self._hi + k] = lats
        self._hi += k
        self._lo = max(self._lo, self._hi - MAX_SAMPLES)

    def columns(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Starts and latencies, oldest first (views, valid until the next `add`)."""
        return self._data[0, self._lo : self._hi], self._data[1, self._lo : self._hi]

    def release(self) -> None:
        """The engine's figures over every sample came: these are not read again."""
        self._data, self._lo, self._hi = np.empty((2, 0)), 0, 0


@dataclass
class _Run:
    label: str
    inputs: str
    batch: int
    model: str
    samples: _Samples = field(default_factory=_Samples)  # the newest, for the live figures
    count: int = 0  # samples seen
    engine: str = ""
    cosine: float | None = None
    final: tuple[int, float, float, float] | None = None  # count, p50, p99, samples/s
    final_cis: tuple[Interval, Interval] = (None, None)  # p50's and p99's, with `final`
    # the machine's load so far: each window folded in as it comes (one time-weighted
    # figure, as `combine` makes of them all; a window kept each 1.1 s grew an hour's run
    # by 0.6 MB, re-combined on every refresh)
    load: Contention | None = None
    final_load: Contention | None = None  # the engine's figure for the whole run
    running: bool = True
    failed: bool = False

    @property
    def contention(self) -> Contention | None:
        return self.final_load or self.load


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
    p50_ci: Interval = None  # 95% intervals from the raw samples
    p99_ci: Interval = None
    machine: str = ""  # "quiet", "busy 1.9", "" (not measured yet)
    machine_line: str = ""  # the contention in one line, with its numbers
    busy: bool = False
    # each Δ (p50, p99, samples/s) is a result: like for like, both quiet, intervals apart
    judged: tuple[bool, bool, bool] = (False, False, False)
    why_not: str = ""  # why the Δ is no verdict ('' when it is one, or without a baseline)


class RunsSummary:
    """Runs of one live session, fed from the engine's events, in order."""

    def __init__(self) -> None:
        self._runs: list[_Run] = []
        self._live: int | None = None  # the run the engine's events feed (the latest started)
        self.baseline: int | None = None

    def __len__(self) -> int:
        return len(self._runs)

    def start(self, label: str, inputs: str, batch: int, model: str = "", engine: str = "") -> int:
        """A run began (RunStarted); the previous one, if still open, ends."""
        self.end()
        self._runs.append(_Run(label, inputs, max(int(batch), 1), model, engine=engine))
        self._live = len(self._runs) - 1
        return self._live

    def recorded(
        self,
        label: str,
        inputs: str,
        model: str,
        figures: tuple[int, float, float, float],
        *,
        batch: int = 1,
        engine: str = "",
        cosine: float | None = None,
        contention: Contention | None = None,
        failed: bool = False,
    ) -> int:
        """A run another process recorded in the session (a tune's trial, a sweep's
        point), ended, with its figures as the file has them (count, p50, p99,
        samples/s); the run the engine's events feed goes on."""
        run = _Run(label, inputs, max(int(batch), 1), model, engine=engine, cosine=cosine)
        run.running, run.failed = False, failed
        count, p50, p99, rate = figures
        run.count = int(count)
        if run.count > 0:
            run.final = (run.count, float(p50), float(p99), float(rate))
            run.final_load = contention
        self._runs.append(run)
        return len(self._runs) - 1

    def add_load(self, contention: Contention) -> None:
        """A window of the machine's load during the running run (ContentionSample)."""
        run = self._open()
        if run is not None:
            run.load = combine([run.load, contention] if run.load else [contention])

    def serving(self, label: str, inputs: str) -> int:
        """The open run serves load (ServingStarted after its RunStarted): relabelled, its
        figures to come from the serving run's summary. An open run that already has
        samples ends, and the load run gets a row of its own."""
        run = self._open()
        if run is None or run.count or run.final is not None:
            return self.start(label, inputs, 1, run.model if run is not None else "")
        run.label, run.inputs, run.batch = label, inputs, 1
        return self._live if self._live is not None else len(self._runs) - 1  # the open one

    def add(self, starts_ns: npt.ArrayLike, latencies_ns: npt.ArrayLike) -> None:
        """Raw samples of the running run (absolute or relative starts, ns)."""
        run = self._open()
        if run is None:
            return
        s = np.asarray(starts_ns, dtype=np.float64).ravel()
        lat = np.asarray(latencies_ns, dtype=np.float64).ravel()
        if s.size == 0 or s.size != lat.size:
            return
        run.samples.add(s, lat)
        run.count += s.size

    def set_cosine(self, cosine: float) -> None:
        run = self._open() or (self._runs[self._live] if self._live is not None else None)
        if run is not None:
            run.cosine = float(cosine)

    def finish(
        self,
        count: int,
        p50_ms: float,
        p99_ms: float,
        samples_per_s: float,
        cis: tuple[Interval, Interval] = (None, None),
        contention: Contention | None = None,
    ) -> None:
        """The engine's statistics over every raw sample of the run (TimingDone): the
        figures, p50's and p99's intervals, how busy the machine was."""
        run = self._open()
        if run is not None and count > 0:
            run.final = (int(count), float(p50_ms), float(p99_ms), float(samples_per_s))
            run.final_cis = cis
            run.final_load = contention
            run.samples.release()  # the figures are the engine's from now on

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
        base_i = self.baseline
        base = figures[base_i] if base_i is not None else None
        out = []
        for i, (run, (count, p50, p99, rate, cis)) in enumerate(
            zip(self._runs, figures, strict=True)
        ):
            d = (
                tuple(_change(v, b) for v, b in zip((p50, p99, rate), base[1:4], strict=True))
                if base is not None
                else (math.nan,) * 3
            )
            load = run.contention
            judged, why = (False, False, False), ""
            if base is not None and base_i is not None and i != base_i:
                judged, why = _judge(self._runs[base_i], base[4], run, cis)
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
                    i == base_i,
                    d[0],
                    d[1],
                    d[2],
                    p50_ci=cis[0],
                    p99_ci=cis[1],
                    machine=load.short() if load else "",
                    machine_line=load.line() if load else "",
                    busy=bool(load and load.busy),
                    judged=judged,
                    why_not=why,
                )
            )
        return out

    def _open(self) -> _Run | None:
        run = self._runs[self._live] if self._live is not None else None
        return run if run is not None and run.running else None

    @staticmethod
    def _figures(run: _Run) -> tuple[int, float, float, float, tuple[Interval, Interval]]:
        if run.final is not None:
            return (*run.final, run.final_cis)
        if not len(run.samples):
            return 0, math.nan, math.nan, math.nan, (None, None)
        starts, lats = run.samples.columns()
        stats = latency_stats(lats.astype(np.int64))
        rate = throughput(starts.astype(np.int64), lats.astype(np.int64), run.batch)
        return run.count, stats.p50, stats.p99, rate.samples_per_s, (stats.p50_ci, stats.p99_ci)


def _judge(
    base: _Run, base_cis: tuple[Interval, Interval], run: _Run, cis: tuple[Interval, Interval]
) -> tuple[tuple[bool, bool, bool], str]:
    """Which of the run's Δs are results against the baseline, and why not the others:
    other model, inputs, batch or engine; a busy machine; intervals that overlap."""
    sides = [
        Side(r.model or None, r.inputs, r.batch, r.engine or None, r.contention)
        for r in (base, run)
    ]
    reasons = unlike(sides[0], sides[1])
    for name, side in (("the baseline", sides[0]), ("this run", sides[1])):
        if side.contention is not None and side.contention.busy:
            reasons.append(f"{name} was measured busy ({side.contention.line()})")
    if reasons:
        return (False, False, False), "no verdict: " + "; ".join(reasons)
    p50 = separated(base_cis[0], cis[0])
    p99 = separated(base_cis[1], cis[1])
    if p50 and p99:
        return (True, True, True), ""
    overlap = [q for q, ok in (("p50", p50), ("p99", p99)) if not ok]
    why = f"{' and '.join(overlap)} intervals overlap (or too few samples): within the noise"
    return (p50, p99, p50), why


def _change(value: float, base: float) -> float:
    """Percent change of `value` against `base` (NaN when either is unknown)."""
    if not (math.isfinite(value) and math.isfinite(base)) or base == 0:
        return math.nan
    return 100.0 * (value - base) / base
