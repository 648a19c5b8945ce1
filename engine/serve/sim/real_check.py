"""A real load run held against the What-if's prediction of the same traffic and batching:
how far apart they are and the likely cause, so a stale or wrong prediction never stands
silently beside a real run that read 40x worse.

The causes, checked in order: one of the real run and the calibration measured on a busy
machine and the other not; the real batches ran slower (or faster) than the calibration
measured them (the machine got busier, the calibration is stale); the real run was past its
capacity, where a small difference in speed decides whether the queue drains or grows
without bound; the cache absorbed a different share. The error is held against the real
system's own repeat spread (the real runs of the same row, when there are two or more): a
prediction cannot be closer than the real runs are to each other (13-25% between runs
minutes apart on a shared 2-core machine). Pure functions, no Qt."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from engine.measure.contention import Contention

CLOSE = 0.15  # within this of each other: agreeing (a busy 2-core machine moves 13-25%)
SPEED_OFF = 0.15  # the real batches' speed this far from the calibration's: a cause


@dataclass(frozen=True)
class RealCheck:
    """The real run's figures beside the prediction's (ms, requests/s)."""

    traffic: str
    real_p50: float
    real_p99: float
    real_rate: float
    real_queue_max: int
    predicted_p50: float
    predicted_p99: float
    predicted_rate: float
    speed_ratio: float  # the real batches' time / the calibration's for the same sizes
    offered_rate: float  # requests/s the traffic offered
    real_hit_rate: float = math.nan
    predicted_hit_rate: float = math.nan
    real_contention: Contention | None = None  # the load run's machine
    calibration_contention: Contention | None = None  # the calibration's
    repeat_spread: float = math.nan  # the real runs of this row: (max - min) / median of p99
    repeats: int = 1  # real runs of this row the spread is from
    calibration_drift: float = math.nan  # its batch times' move while it was timed
    prediction_flags: tuple[str, ...] = ()  # what the prediction itself could not promise

    @property
    def p99_ratio(self) -> float:
        return _ratio(self.real_p99, self.predicted_p99)

    @property
    def p50_ratio(self) -> float:
        return _ratio(self.real_p50, self.predicted_p50)

    @property
    def tolerance(self) -> float:
        """How far apart they may be and still agree: CLOSE, or the real runs' own spread
        when it is wider (a prediction cannot be closer than the real runs are)."""
        spread = self.repeat_spread
        return max(CLOSE, spread) if math.isfinite(spread) else CLOSE

    @property
    def agrees(self) -> bool:
        return all(
            math.isfinite(r) and abs(r - 1.0) <= self.tolerance
            for r in (self.p50_ratio, self.p99_ratio)
        )

    def spread_text(self) -> str:
        """The prediction's p99 error against the real runs' own repeat spread, or how to
        know that spread."""
        r = self.p99_ratio
        if not math.isfinite(r):
            return ""
        error = f"the prediction's p99 is off by {abs(r - 1):.0%}"
        if not math.isfinite(self.repeat_spread) or self.repeats < 2:
            drift = self.calibration_drift
            own = (
                f" (the calibration's own batch times moved {drift:.0%} while it was timed)"
                if math.isfinite(drift)
                else ""
            )
            return f"{error}; run the same load again to see the real runs' own spread{own}"
        where = "within" if abs(r - 1) <= self.repeat_spread else "outside"
        return (
            f"{error}, {where} the real runs' own spread of {self.repeat_spread:.0%} "
            f"({self.repeats} runs of this row)"
        )

    def contention_text(self) -> str:
        """The real run's and the calibration's machine side by side ('' if neither known)."""
        if self.real_contention is None and self.calibration_contention is None:
            return ""
        return (
            f"machine: the real run {_busy(self.real_contention)} · the calibration "
            f"{_busy(self.calibration_contention)}"
        )

    def cause(self) -> str:
        """The likely reason they differ, in a sentence ('' when they agree)."""
        if self.agrees:
            return ""
        why = [f"the prediction was flagged: {f}" for f in self.prediction_flags]
        real, cal = self.real_contention, self.calibration_contention
        if real is not None and cal is not None and real.busy != cal.busy:
            which = "real run" if real.busy else "calibration"
            other = "calibration" if real.busy else "real run"
            busy = real if real.busy else cal
            why.append(
                f"the {which} was measured busy ({'; '.join(busy.reasons())}) and the {other} quiet"
            )
        s = self.speed_ratio
        if math.isfinite(s) and abs(s - 1.0) > SPEED_OFF:
            side = "slower" if s > 1 else "faster"
            why.append(
                f"the real batches ran {_times(s if s > 1 else 1 / s)} {side} than the "
                "calibration measured them (the machine's load changed, or the calibration "
                "is stale: Recalibrate)"
            )
        overloaded = (
            math.isfinite(self.real_rate)
            and self.offered_rate > 0
            and self.real_rate < 0.9 * self.offered_rate
        )
        if overloaded:
            why.append(
                f"the real run served {self.real_rate:.0f} of {self.offered_rate:.0f} "
                f"requests/s offered (queue up to {self.real_queue_max:,}): past capacity the "
                "queue grows with the run's length, and a few % of speed decide it"
            )
        hits = (self.real_hit_rate, self.predicted_hit_rate)
        if all(math.isfinite(h) for h in hits) and abs(hits[0] - hits[1]) > 0.1:
            why.append(
                f"the cache served {hits[0]:.0%} of requests for real against {hits[1]:.0%} "
                "simulated"
            )
        if not why:
            why.append(
                "not the batches' speed nor overload: the difference is in the waiting "
                "(the real loop's scheduling or the machine's stalls)"
            )
        return "; ".join(why)

    def text(self) -> str:
        head = (
            f"REAL run at {self.traffic}: p50 {_ms(self.real_p50)}, p99 {_ms(self.real_p99)}, "
            f"{self.real_rate:.0f} requests/s · predicted p50 {_ms(self.predicted_p50)}, "
            f"p99 {_ms(self.predicted_p99)}, {self.predicted_rate:.0f} requests/s"
        )
        tail = [t for t in (self.spread_text(), self.contention_text()) if t]
        more = "".join(f"\n{t}" for t in tail)
        if self.agrees:
            return head + f" · they agree within {self.tolerance:.0%}" + more
        return head + f" · real p99 {_times(self.p99_ratio)} the prediction: {self.cause()}" + more


def check(
    traffic: str,
    real: dict[str, Any],
    predicted: dict[str, Any],
    speed_ratio: float,
    offered_rate: float,
    calibration: Contention | None = None,
    earlier: list[dict[str, Any]] | None = None,
    drift: float = math.nan,
    flags: list[str] | None = None,
) -> RealCheck:
    """`real` and `predicted`: serving summaries (the load run's, the simulator's);
    `calibration`: how busy the machine was while it was calibrated; `earlier`: summaries
    of earlier real runs of the same row (their p99s and this one's give the spread);
    `drift`: how far the calibration's own batch times moved while it was timed; `flags`:
    the prediction's own (past capacity, beyond the calibration), named first as causes."""
    p99s = [_get(r, "latency_ms", "p99") for r in [*(earlier or []), real]]
    p99s = [v for v in p99s if math.isfinite(v) and v > 0]
    machine = real.get("machine") if isinstance(real.get("machine"), dict) else None
    return RealCheck(
        traffic=traffic,
        real_p50=_get(real, "latency_ms", "p50"),
        real_p99=_get(real, "latency_ms", "p99"),
        real_rate=_get(real, "throughput", "requests_per_s"),
        real_queue_max=int(_get(real, "queue_depth", "max", default=0.0)),
        predicted_p50=_get(predicted, "latency_ms", "p50"),
        predicted_p99=_get(predicted, "latency_ms", "p99"),
        predicted_rate=_get(predicted, "throughput", "requests_per_s"),
        speed_ratio=float(speed_ratio),
        offered_rate=float(offered_rate),
        real_hit_rate=_get(real, "cache", "hit_rate"),
        predicted_hit_rate=_get(predicted, "cache", "hit_rate"),
        real_contention=Contention.from_json((machine or {}).get("contention")),
        calibration_contention=calibration,
        repeat_spread=spread(p99s),
        repeats=len(p99s),
        calibration_drift=float(drift),
        prediction_flags=tuple(f for f in flags or [] if not f.startswith("calibrated busy")),
    )


def spread(values: list[float]) -> float:
    """(max - min) / median of repeated figures; NaN with fewer than two."""
    if len(values) < 2:
        return math.nan
    mid = statistics.median(values)
    return (max(values) - min(values)) / mid if mid > 0 else math.nan


def _busy(c: Contention | None) -> str:
    if c is None:
        return "not measured"
    return f"{c.verdict} (others used {c.others_cpu:.2f} of {c.cpus} CPUs)"


def _get(d: dict[str, Any], group: str, key: str, default: float = math.nan) -> float:
    try:
        value = float((d.get(group) or {}).get(key, default))
    except (TypeError, ValueError):
        return default
    return value if math.isfinite(value) else default


def _ratio(a: float, b: float) -> float:
    return a / b if math.isfinite(a) and math.isfinite(b) and b > 0 else math.nan


def _times(r: float) -> str:
    if not math.isfinite(r):
        return "?x"
    return f"{r:.1f}x" if r < 10 else f"{r:,.0f}x"


def _ms(v: float) -> str:
    if not math.isfinite(v):
        return "-"
    return f"{v:,.0f} ms" if v >= 100 else f"{v:.3g} ms"
