"""Comparing two runs: metric deltas with bootstrap confidence intervals, per-op diffs,
config and accuracy differences. Pure functions over numpy arrays and op-row dicts.

The confidence interval is a circular *block* bootstrap of the metric difference: latency
samples are a time series (drift, bursts of interference), so samples are resampled in
contiguous blocks of ~sqrt(n) samples, which keeps the short-range correlation an i.i.d.
bootstrap would destroy (and which makes i.i.d. intervals too narrow). Runs longer than
`MAX_SAMPLES` are bootstrapped on a seeded random subset of that size, kept in time order;
the point estimates always use every sample. A smaller subset only widens the interval
(conservative for a gate). What no within-run statistic can see is a machine that was
uniformly slower during one whole run: repeat or interleave runs for that.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from engine.errors import OpScopeError

FloatArray = npt.NDArray[np.float64]
AnyFloats = npt.NDArray[np.floating[Any]]
IntArray = npt.NDArray[np.int64]
Stat = Callable[[AnyFloats], FloatArray]  # (resamples, n) -> (resamples,)

METRICS = ("p50", "p90", "p99", "mean", "throughput")
GENERATION_METRICS = ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99")  # two generation runs
QUANTILES = {"p50": 0.50, "p90": 0.90, "p99": 0.99}
RESAMPLES = 2000
MAX_SAMPLES = 20_000
CONFIDENCE = 0.95
CHUNK_VALUES = 2_000_000  # values gathered per bootstrap chunk (16 MB of float64)
MIN_SAMPLES = 2


class CompareError(OpScopeError):
    """Two runs cannot be compared (no samples, unknown metric)."""


@dataclass(frozen=True, slots=True)
class Samples:
    """One run's raw timing samples, in time order."""

    starts_ns: IntArray
    latencies_ns: IntArray
    batch: int = 1


@dataclass(frozen=True, slots=True)
class MetricDelta:
    """Candidate against baseline on one metric; percentages of the baseline's value."""

    metric: str
    unit: str  # "ms" or "samples/s"
    baseline: float
    candidate: float
    delta_pct: float  # signed change of the value: +10 = the candidate's value is 10% higher
    ci_pct: tuple[float, float]  # confidence interval of delta_pct
    higher_is_better: bool
    n: tuple[int, int]  # samples behind the point estimates
    n_bootstrap: tuple[int, int]  # samples behind the interval (a subset when capped)
    block: tuple[int, int]  # bootstrap block length per run
    resamples: int
    confidence: float = CONFIDENCE
    runs: tuple[int, int] = (1, 1)  # runs pooled per side (several: a hierarchical bootstrap)

    @property
    def slowdown_pct(self) -> float:
        """How much worse the candidate is: latency up, or throughput down (negative: better)."""
        return -self.delta_pct if self.higher_is_better else self.delta_pct

    @property
    def slowdown_ci_pct(self) -> tuple[float, float]:
        lo, hi = self.ci_pct
        return (-hi, -lo) if self.higher_is_better else (lo, hi)

    @property
    def significant(self) -> bool:
        """The interval excludes zero: the runs differ beyond their own noise."""
        lo, hi = self.ci_pct
        return lo > 0 or hi < 0

    def regression(self, threshold_pct: float) -> bool:
        """Significantly worse AND by more than the threshold: the interval's lower bound of
        the slowdown exceeds it."""
        return self.slowdown_ci_pct[0] > threshold_pct

    def to_json(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "unit": self.unit,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "delta_pct": self.delta_pct,
            "ci_pct": list(self.ci_pct),
            "slowdown_pct": self.slowdown_pct,
            "slowdown_ci_pct": list(self.slowdown_ci_pct),
            "higher_is_better": self.higher_is_better,
            "significant": self.significant,
            "n": list(self.n),
            "n_bootstrap": list(self.n_bootstrap),
            "block": list(self.block),
            "resamples": self.resamples,
            "confidence": self.confidence,
            "runs": list(self.runs),
        }


# -- metrics and the bootstrap ---------------------------------------------------------


def metric_values(metric: str, s: Samples) -> tuple[FloatArray, Stat, float]:
    """The per-sample values a metric is computed from, the statistic over resampled rows,
    and the factor that turns the statistic into the metric's unit."""
    if metric in QUANTILES:
        q = QUANTILES[metric]
        return (s.latencies_ns.astype(np.float64) / 1e6, lambda rows: row_quantile(rows, q), 1.0)
    if metric == "mean":
        return (
            s.latencies_ns.astype(np.float64) / 1e6,
            lambda rows: rows.mean(axis=1, dtype=np.float64),
            1.0,
        )
    if metric == "throughput":
        # samples/s = batch * n / wall, wall = sum of start-to-start intervals + last latency
        # (exactly engine.measure.stats.throughput); the bootstrap resamples those intervals.
        ends = np.append(s.starts_ns[1:], s.starts_ns[-1] + s.latencies_ns[-1])
        intervals = (ends - s.starts_ns).astype(np.float64)
        return intervals, _per_second, float(s.batch)
    raise CompareError(f"unknown metric {metric!r} (choose from {', '.join(METRICS)})")


def _per_second(rows: AnyFloats) -> FloatArray:
    """Each row's rate from its mean interval (ns): inf for zero intervals, which
    `checked_figure` refuses, without a RuntimeWarning on the way."""
    with np.errstate(divide="ignore"):
        out: FloatArray = 1e9 / rows.mean(axis=1, dtype=np.float64)
    return out


def row_quantile(rows: AnyFloats, q: float) -> FloatArray:
    """Each row's q-quantile, numpy's default ('linear') definition, via one partition with
    the rank below and a min-scan for the rank above: ~5x faster than `np.quantile`."""
    n = rows.shape[1]
    pos = (n - 1) * q
    lo = math.floor(pos)
    part = np.partition(rows, lo, axis=1)
    low = part[:, lo]
    if lo + 1 >= n or pos == lo:
        return low.astype(np.float64)
    high = part[:, lo + 1 :].min(axis=1)  # the next rank: the smallest value above `lo`
    out: FloatArray = low + (high - low).astype(np.float64) * (pos - lo)
    return out


def checked_figure(side: str, metric: str, value: float) -> float:
    """`value`, a side's figure for `metric`, when it can be compared: a finite number
    above 0. An all-zero baseline made every ratio NaN, and a NaN slowdown never exceeds a
    threshold, so the gate said "p50 nan% faster" and passed: such a side is bad input."""
    if math.isfinite(value) and value > 0:
        return value
    unit = "samples/s" if metric == "throughput" else "ms"
    raise CompareError(
        f"the {side}'s {metric} is {value:g} {unit}: its samples are not real timings "
        "(zero, negative or not a number), so nothing can be compared with it"
    )


def metric_value(metric: str, s: Samples) -> float:
    """The metric over every sample: ms for latency metrics, samples/s for throughput."""
    values, stat, scale = metric_values(metric, s)
    return float(stat(values[None, :])[0]) * scale


def block_length(n: int) -> int:
    """~sqrt(n): long enough to keep drift and bursts inside blocks, with ~sqrt(n) blocks."""
    return max(1, math.isqrt(max(n, 1)))


def capped_subset(values: FloatArray, cap: int, rng: np.random.Generator) -> FloatArray:
    """At most `cap` values, a seeded random subset kept in time order."""
    if values.size <= cap:
        return values
    keep = np.sort(rng.choice(values.size, size=cap, replace=False))
    return values[keep]


def block_bootstrap(
    values: AnyFloats, stat: Stat, resamples: int, block: int, rng: np.random.Generator
) -> FloatArray:
    """`stat` over `resamples` circular block-bootstrap resamples of `values` (time order):
    each resample glues random blocks of `block` consecutive values (wrapping at the end)
    until it has as many values as the original. Vectorised in chunks of rows."""
    n = values.size
    block = max(1, min(block, n))
    blocks = -(-n // block)
    wrapped = np.concatenate([values, values[: block - 1]])
    windows = np.lib.stride_tricks.sliding_window_view(wrapped, block)  # (n, block), a view
    out = np.empty(resamples, dtype=np.float64)
    rows = max(1, CHUNK_VALUES // (blocks * block))
    for lo in range(0, resamples, rows):
        m = min(rows, resamples - lo)
        starts = rng.integers(0, n, size=(m, blocks))
        out[lo : lo + m] = stat(windows[starts].reshape(m, blocks * block)[:, :n])
    return out


def compare_metric(
    metric: str,
    baseline: Samples,
    candidate: Samples,
    *,
    resamples: int = RESAMPLES,
    max_samples: int = MAX_SAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> MetricDelta:
    """Point estimates from every sample; a percentile interval of the relative difference
    from `resamples` paired draws of independent block-bootstrap resamples of each run."""
    for name, s in (("baseline", baseline), ("candidate", candidate)):
        if s.latencies_ns.size < MIN_SAMPLES or s.starts_ns.size != s.latencies_ns.size:
            raise CompareError(
                f"the {name} run has {s.latencies_ns.size} latency samples; "
                f"comparing needs at least {MIN_SAMPLES}"
            )
    if not 0 < confidence < 1:
        raise CompareError(f"confidence must be within (0, 1), got {confidence}")
    rng = np.random.default_rng(seed)
    points: list[float] = []
    subset_points: list[float] = []
    boots: list[FloatArray] = []
    sizes: list[tuple[int, int, int]] = []
    for side, s in (("baseline", baseline), ("candidate", candidate)):
        values, stat, scale = metric_values(metric, s)
        points.append(checked_figure(side, metric, float(stat(values[None, :])[0]) * scale))
        subset = capped_subset(values, max_samples, rng)
        subset_points.append(float(stat(subset[None, :])[0]) * scale)
        block = block_length(subset.size)
        # float32 halves the memory traffic of the resamples (7 digits are plenty here)
        boots.append(
            block_bootstrap(subset.astype(np.float32), stat, resamples, block, rng) * scale
        )
        sizes.append((values.size, subset.size, block))
    base, cand = points
    delta = relative_pct(base, cand)
    with np.errstate(divide="ignore", invalid="ignore"):
        deltas = (boots[1] / boots[0] - 1.0) * 100.0
    deltas = deltas[np.isfinite(deltas)]
    alpha = (1.0 - confidence) / 2.0
    if deltas.size and math.isfinite(delta):
        # The spread of the subset's bootstrap around the subset's own estimate, placed
        # around the full-data estimate (the same thing when nothing was subsampled).
        shift = delta - relative_pct(*subset_points)
        lo, hi = (float(v) + shift for v in np.quantile(deltas, [alpha, 1.0 - alpha]))
    else:
        lo = hi = math.nan
    return MetricDelta(
        metric=metric,
        unit="samples/s" if metric == "throughput" else "ms",
        baseline=base,
        candidate=cand,
        delta_pct=delta,
        ci_pct=(lo, hi),
        higher_is_better=metric == "throughput",
        n=(sizes[0][0], sizes[1][0]),
        n_bootstrap=(sizes[0][1], sizes[1][1]),
        block=(sizes[0][2], sizes[1][2]),
        resamples=resamples,
        confidence=confidence,
    )


def relative_pct(base: float, cand: float) -> float:
    """(cand / base - 1) * 100; NaN when the baseline is 0 or not finite."""
    if not math.isfinite(base) or base == 0 or not math.isfinite(cand):
        return math.nan
    return (cand / base - 1.0) * 100.0


# -- per-op differences ----------------------------------------------------------------

OpStatus = Literal["both", "added", "removed"]


@dataclass(frozen=True, slots=True)
class OpDiff:
    """One node (or op type) in either run: its time, share and bytes on both sides."""

    key: str  # node name, or op type
    op_type: str  # "Conv", or "Conv -> FusedConv" when a same-named node changed type
    status: OpStatus  # "both", "added" (candidate only), "removed" (baseline only)
    base_time_ms: float | None
    cand_time_ms: float | None
    base_share: float | None
    cand_share: float | None
    base_bytes: int | None
    cand_bytes: int | None

    @property
    def delta_time_ms(self) -> float:
        return (self.cand_time_ms or 0.0) - (self.base_time_ms or 0.0)

    @property
    def delta_time_pct(self) -> float | None:
        if self.status != "both" or self.base_time_ms is None or self.cand_time_ms is None:
            return None
        value = relative_pct(self.base_time_ms, self.cand_time_ms)
        return None if math.isnan(value) else value

    @property
    def delta_share(self) -> float:
        return (self.cand_share or 0.0) - (self.base_share or 0.0)

    @property
    def delta_bytes(self) -> int:
        return (self.cand_bytes or 0) - (self.base_bytes or 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.key,
            "op_type": self.op_type,
            "status": self.status,
            "baseline": None
            if self.base_time_ms is None
            else {"time_ms": self.base_time_ms, "share": self.base_share, "bytes": self.base_bytes},
            "candidate": None
            if self.cand_time_ms is None
            else {"time_ms": self.cand_time_ms, "share": self.cand_share, "bytes": self.cand_bytes},
            "delta_time_ms": self.delta_time_ms,
            "delta_time_pct": self.delta_time_pct,
            "delta_share": self.delta_share,
            "delta_bytes": self.delta_bytes,
        }


def diff_ops(
    baseline: Sequence[Mapping[str, Any]], candidate: Sequence[Mapping[str, Any]], key: str = "name"
) -> list[OpDiff]:
    """Match op rows (shaped like `engine.measure.op_stats.stat_to_json`) by `key` ("name" for
    nodes, "op_type" for op types); unmatched rows are "removed" or "added" (what fusion
    or quantization did). Largest absolute time change first."""
    base = {str(r[key]): r for r in baseline}
    cand = {str(r[key]): r for r in candidate}
    out: list[OpDiff] = []
    for name in [*base, *(k for k in cand if k not in base)]:
        b, c = base.get(name), cand.get(name)
        types = [str(r["op_type"]) for r in (b, c) if r is not None]
        op_type = types[0] if len(set(types)) == 1 else " -> ".join(types)
        status: OpStatus = "both" if b and c else ("removed" if b else "added")
        out.append(
            OpDiff(
                key=name,
                op_type=op_type,
                status=status,
                base_time_ms=_num(b, "time_ms"),
                cand_time_ms=_num(c, "time_ms"),
                base_share=_num(b, "share"),
                cand_share=_num(c, "share"),
                base_bytes=_int(b, "bytes"),
                cand_bytes=_int(c, "bytes"),
            )
        )
    out.sort(key=lambda d: (-abs(d.delta_time_ms), d.key))
    return out


def _num(row: Mapping[str, Any] | None, key: str) -> float | None:
    if row is None or row.get(key) is None:
        return None
    return float(row[key])


def _int(row: Mapping[str, Any] | None, key: str) -> int | None:
    if row is None or row.get(key) is None:
        return None
    return int(row[key])


# -- configs and accuracy --------------------------------------------------------------


def config_diff(
    baseline: Mapping[str, Any] | None, candidate: Mapping[str, Any] | None
) -> dict[str, list[Any]]:
    """Keys whose values differ, as {key: [baseline value, candidate value]}."""
    b, c = baseline or {}, candidate or {}
    return {k: [b.get(k), c.get(k)] for k in sorted({*b, *c}) if b.get(k) != c.get(k)}


ACCURACY_KEYS = ("cosine", "max_abs_err", "mean_abs_err", "top1_agreement")


def accuracy_delta(
    baseline: Mapping[str, Any] | None, candidate: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Both runs' accuracy against FP32 and candidate - baseline per key (None where
    either side lacks it). An FP32 run is its own reference: pass REFERENCE_ACCURACY."""
    out: dict[str, Any] = {
        "baseline": dict(baseline) if baseline else None,
        "candidate": dict(candidate) if candidate else None,
    }
    for key in ACCURACY_KEYS:
        b = None if baseline is None else baseline.get(key)
        c = None if candidate is None else candidate.get(key)
        ok = all(isinstance(v, int | float) and math.isfinite(v) for v in (b, c))
        out[key] = float(c) - float(b) if ok else None  # type: ignore[arg-type]
    return out


REFERENCE_ACCURACY: dict[str, Any] = {
    "baseline": "self (fp32)",
    "cosine": 1.0,
    "max_abs_err": 0.0,
    "mean_abs_err": 0.0,
    "top1_agreement": 1.0,
}
