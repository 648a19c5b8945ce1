"""Several runs per side: a hierarchical bootstrap of the candidate/baseline ratio of a
metric, for `opscope gate` and `opscope compare FILE:1,2,3 FILE:4,5`. Pure numpy.

On shared machines one config's median differs by 10-20% between processes, while the
bootstrap within one run sees only the noise inside it, so a single-run comparison calls
a slower *process* a regression. Here each resample first draws K runs with replacement
(which carries the spread between processes), then resamples blocks of samples inside
each drawn run (the noise within a run, in time order as `deltas.block_bootstrap`
does), and takes the metric of the pooled resample. The interval is the percentile
interval of the resampled ratios; the point estimate is the metric over every sample.
Resampling at both levels counts the within-run noise a little twice: the interval is
slightly conservative, as a gate should be.

With one run per side the first level has nothing to choose from and this is the
within-run block bootstrap of `opscope compare`: it cannot see between-process noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.analysis.deltas import (
    CHUNK_VALUES,
    CONFIDENCE,
    MAX_SAMPLES,
    MIN_SAMPLES,
    CompareError,
    FloatArray,
    MetricDelta,
    Samples,
    Stat,
    block_length,
    capped_subset,
    checked_figure,
    metric_values,
    relative_pct,
)

PER_RUN = 1000  # samples per run behind the interval (a seeded, time-ordered subset)
GATE_RESAMPLES = 2000
METHOD = "hierarchical bootstrap: runs with replacement, then blocks of samples within each"
ONE_RUN_NOTE = (
    "a side has one run: the interval cannot see that side's spread between processes, only "
    "the noise within its run (record more runs)"
)


@dataclass(frozen=True, slots=True)
class PooledBoot:
    """The point estimate over every sample of every run and the bootstrap of the relative
    difference (percent, candidate vs baseline), placed around it."""

    metric: str
    baseline: float  # the metric over every sample of the baseline's runs, pooled
    candidate: float
    delta_pct: float
    deltas_pct: FloatArray  # bootstrap resamples of delta_pct (finite values only)
    baseline_runs: tuple[float, ...]  # each run's own value, for showing the spread
    candidate_runs: tuple[float, ...]
    n: tuple[int, int]  # samples behind the point estimates
    n_bootstrap: tuple[int, int]  # samples per resample (runs x per-run subset)
    block: tuple[int, int]
    resamples: int

    @property
    def higher_is_better(self) -> bool:
        return self.metric == "throughput"

    @property
    def unit(self) -> str:
        return "samples/s" if self.higher_is_better else "ms"

    @property
    def runs(self) -> tuple[int, int]:
        return (len(self.baseline_runs), len(self.candidate_runs))

    def slowdowns_pct(self) -> FloatArray:
        """The bootstrap of how much worse the candidate is (throughput down = worse)."""
        out: FloatArray = -self.deltas_pct if self.higher_is_better else self.deltas_pct
        return out


@dataclass(frozen=True, slots=True)
class GateResult:
    """One metric gated: the candidate's slowdown and its one-sided lower confidence bound;
    a regression when that bound exceeds the threshold."""

    metric: str
    unit: str
    higher_is_better: bool
    baseline: float
    candidate: float
    slowdown_pct: float  # + = worse (latency up or throughput down)
    slowdown_bound_pct: float  # the slowdown exceeds this with `confidence` (one-sided)
    slowdown_ci_pct: tuple[float, float]  # two-sided interval at `confidence`, for display
    threshold_pct: float
    confidence: float
    baseline_runs: tuple[float, ...]
    candidate_runs: tuple[float, ...]
    n: tuple[int, int]
    resamples: int
    seed: int
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def regression(self) -> bool:
        return self.slowdown_bound_pct > self.threshold_pct

    @property
    def runs(self) -> tuple[int, int]:
        return (len(self.baseline_runs), len(self.candidate_runs))

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "unit": self.unit,
            "higher_is_better": self.higher_is_better,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "slowdown_pct": self.slowdown_pct,
            "slowdown_bound_pct": self.slowdown_bound_pct,
            "slowdown_ci_pct": list(self.slowdown_ci_pct),
            "threshold_pct": self.threshold_pct,
            "confidence": self.confidence,
            "regression": self.regression,
            "baseline_runs": list(self.baseline_runs),
            "candidate_runs": list(self.candidate_runs),
            "runs": list(self.runs),
            "n": list(self.n),
            "resamples": self.resamples,
            "seed": self.seed,
            "method": METHOD,
            "notes": list(self.notes),
        }


def spread_pct(values: Sequence[float]) -> float:
    """(max - min) / median of the runs' values, in percent (0 for one run)."""
    if len(values) < 2:
        return 0.0
    med = float(np.median(values))
    return (max(values) - min(values)) / med * 100.0 if med else math.nan


def hierarchical_bootstrap(
    runs: Sequence[FloatArray],
    stat: Stat,
    resamples: int,
    rng: np.random.Generator,
    m: int,
) -> tuple[FloatArray, int]:
    """`stat` over `resamples` hierarchical resamples of `runs` (each a time series of
    per-sample values): each resample draws K runs with replacement and, from each, m
    values as a circular block bootstrap of that whole run, then pools the K*m values.
    Every drawn run weighs the same; drawing m <= n values of a run of n only widens the
    interval. Returns (the resampled statistics, the block length)."""
    if not runs or m < 1:
        raise CompareError("no runs to bootstrap")
    k = len(runs)
    sizes = np.array([r.size for r in runs], dtype=np.int64)
    block = max(1, min(block_length(m), m, int(sizes.min())))
    blocks = -(-m // block)
    # each run followed by its own first block-1 values: a block wraps at the run's end
    data = np.zeros((k, int(sizes.max()) + block - 1), dtype=np.float32)  # half the traffic
    for i, run in enumerate(runs):
        data[i, : run.size] = run
        data[i, run.size : run.size + block - 1] = run[: block - 1]
    offsets = np.arange(block, dtype=np.int64)
    out = np.empty(resamples, dtype=np.float64)
    rows = max(1, CHUNK_VALUES // (k * blocks * block))
    for lo in range(0, resamples, rows):
        r = min(rows, resamples - lo)
        chosen = rng.integers(0, k, size=(r, k, 1))  # runs, with replacement
        n = sizes[chosen]  # (r, k, 1): each drawn run's length
        starts = (rng.random((r, k, blocks)) * n).astype(np.int64)  # blocks within it
        index = starts[..., None] + offsets
        values = data[chosen[..., None], index].reshape(r, k, blocks * block)[:, :, :m]
        out[lo : lo + r] = stat(values.reshape(r, k * m))
    return out, block


def pooled_values(metric: str, runs: Sequence[Samples]) -> tuple[list[FloatArray], Stat, float]:
    """Each run's per-sample values of `metric`, the statistic and the unit factor; all runs
    of a side must share one batch size (samples/s counts it)."""
    if not runs:
        raise CompareError("a side has no runs")
    batches = {s.batch for s in runs}
    if len(batches) > 1:
        raise CompareError(f"the runs of one side differ in batch size ({sorted(batches)})")
    values: list[FloatArray] = []
    stat: Stat | None = None
    scale = 1.0
    for s in runs:
        if s.latencies_ns.size < MIN_SAMPLES or s.starts_ns.size != s.latencies_ns.size:
            raise CompareError(
                f"a run has {s.latencies_ns.size} latency samples; comparing needs at least "
                f"{MIN_SAMPLES}"
            )
        v, stat, scale = metric_values(metric, s)
        values.append(v)
    assert stat is not None
    return values, stat, scale


def pooled_bootstrap(
    metric: str,
    baseline: Sequence[Samples],
    candidate: Sequence[Samples],
    *,
    resamples: int = GATE_RESAMPLES,
    per_run: int = PER_RUN,
    seed: int = 0,
) -> PooledBoot:
    """The relative difference of `metric` between two sets of runs, pooled, with its
    hierarchical bootstrap (seeded: the same inputs give the same answer). Both sides
    draw the same m = min(per_run, shortest run) values per run, so a small-sample bias
    of a high percentile is the same on both sides and cancels in the ratio."""
    rng = np.random.default_rng(seed)
    sides = [pooled_values(metric, side) for side in (baseline, candidate)]
    longest = [[capped_subset(v, MAX_SAMPLES, rng) for v in values] for values, _, _ in sides]
    m = min(per_run, *(v.size for values in longest for v in values))
    points: list[float] = []
    boots: list[FloatArray] = []
    each: list[tuple[float, ...]] = []
    sizes: list[tuple[int, int]] = []
    for side, (values, stat, scale), capped in zip(
        ("baseline", "candidate"), sides, longest, strict=True
    ):
        everything = np.concatenate(values)
        points.append(checked_figure(side, metric, float(stat(everything[None, :])[0]) * scale))
        each.append(tuple(float(stat(v[None, :])[0]) * scale for v in values))
        boot, block = hierarchical_bootstrap(capped, stat, resamples, rng, m)
        boots.append(boot * scale)
        sizes.append((everything.size, block))
    delta = relative_pct(points[0], points[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        deltas = (boots[1] / boots[0] - 1.0) * 100.0
    return PooledBoot(
        metric=metric,
        baseline=points[0],
        candidate=points[1],
        delta_pct=delta,
        deltas_pct=deltas[np.isfinite(deltas)],
        baseline_runs=each[0],
        candidate_runs=each[1],
        n=(sizes[0][0], sizes[1][0]),
        n_bootstrap=(m * len(baseline), m * len(candidate)),
        block=(sizes[0][1], sizes[1][1]),
        resamples=resamples,
    )


def gate_metric(
    metric: str,
    baseline: Sequence[Samples],
    candidate: Sequence[Samples],
    *,
    threshold_pct: float,
    confidence: float = CONFIDENCE,
    resamples: int = GATE_RESAMPLES,
    per_run: int = PER_RUN,
    seed: int = 0,
) -> GateResult:
    """Is the candidate worse by more than `threshold_pct`, with one-sided `confidence`?
    The bound is the (1 - confidence) quantile of the bootstrapped slowdown."""
    if not 0 < confidence < 1:
        raise CompareError(f"confidence must be within (0, 1), got {confidence}")
    boot = pooled_bootstrap(
        metric, baseline, candidate, resamples=resamples, per_run=per_run, seed=seed
    )
    slow = boot.slowdowns_pct()
    slowdown = -boot.delta_pct if boot.higher_is_better else boot.delta_pct
    if slow.size and math.isfinite(slowdown):
        alpha = 1.0 - confidence
        bound, lo, hi = (float(v) for v in np.quantile(slow, [alpha, alpha / 2, 1 - alpha / 2]))
    else:  # a NaN bound never exceeds the threshold: it would pass without a result
        raise CompareError(f"{metric}: the bootstrap gave no finite slowdown to gate on")
    notes = (ONE_RUN_NOTE,) if 1 in boot.runs else ()
    return GateResult(
        metric=metric,
        unit=boot.unit,
        higher_is_better=boot.higher_is_better,
        baseline=boot.baseline,
        candidate=boot.candidate,
        slowdown_pct=slowdown,
        slowdown_bound_pct=bound,
        slowdown_ci_pct=(lo, hi),
        threshold_pct=threshold_pct,
        confidence=confidence,
        baseline_runs=boot.baseline_runs,
        candidate_runs=boot.candidate_runs,
        n=boot.n,
        resamples=resamples,
        seed=seed,
        notes=notes,
    )


def pooled_metric_delta(
    metric: str,
    baseline: Sequence[Samples],
    candidate: Sequence[Samples],
    *,
    resamples: int = GATE_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> MetricDelta:
    """`compare`'s two-sided interval of the relative difference, for several runs a side."""
    boot = pooled_bootstrap(metric, baseline, candidate, resamples=resamples, seed=seed)
    alpha = (1.0 - confidence) / 2.0
    if boot.deltas_pct.size and math.isfinite(boot.delta_pct):
        lo, hi = (float(v) for v in np.quantile(boot.deltas_pct, [alpha, 1.0 - alpha]))
    else:
        lo = hi = math.nan
    return MetricDelta(
        metric=metric,
        unit=boot.unit,
        baseline=boot.baseline,
        candidate=boot.candidate,
        delta_pct=boot.delta_pct,
        ci_pct=(lo, hi),
        higher_is_better=boot.higher_is_better,
        n=boot.n,
        n_bootstrap=boot.n_bootstrap,
        block=boot.block,
        resamples=resamples,
        confidence=confidence,
        runs=boot.runs,
    )
