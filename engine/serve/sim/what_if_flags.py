"""What a simulated answer cannot promise, in words: a question past the simulated capacity
(the queue grows with the run's length, so its percentiles depend on the duration), one
outside what the calibration timed (a larger batch, another instance count: extrapolated),
and a calibration measured on a busy machine. The What-if panel and `opscope simulate`
show the same sentences; pure functions, no Qt."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from engine.measure.contention import Contention
from engine.serve.batching import BatchPolicy
from engine.serve.sim.service import ServiceModel

PAST_CAPACITY = (
    "past capacity: the queue grows with the run's length; these percentiles depend on its duration"
)
SHORT_OF = 0.95  # served under this share of the offered rate: the queue was growing


def utilisation(
    offered_rate: float, summary: dict[str, Any], service: ServiceModel, policy: BatchPolicy
) -> float:
    """The offered rate that reaches the model (cache hits skip it) over the simulated
    capacity at full batches (1.0: every instance busy all the time; NaN: unknown)."""
    capacity = service.capacity(policy.max_batch, policy.instances)
    req = summary.get("requests") or {}
    done = req.get("completed") or 0
    hits = (req.get("cache_hits") or 0) / done if done else 0.0
    if not (capacity > 0 and math.isfinite(offered_rate)):
        return math.nan
    return offered_rate * (1.0 - hits) / capacity


def past_capacity(offered_rate: float, summary: dict[str, Any], utilisation: float) -> bool:
    """Past what the server can serve: utilisation at or above 1, or the simulated run
    served visibly less than was offered (its queue grew to the end)."""
    if math.isfinite(utilisation) and utilisation >= 1.0:
        return True
    served = (summary.get("throughput") or {}).get("requests_per_s")
    if not isinstance(served, int | float) or not math.isfinite(served) or offered_rate <= 0:
        return False
    return bool(served < SHORT_OF * offered_rate)


def range_flags(service: ServiceModel, policy: BatchPolicy) -> list[str]:
    """The question's batching beyond what the calibration timed, one sentence each."""
    out: list[str] = []
    sizes = service.sizes
    if policy.max_batch > sizes[-1]:
        out.append(
            f"batch {policy.max_batch} is beyond the calibrated {sizes[0]}-{sizes[-1]}: "
            "extrapolated"
        )
    timed = service.context.get("instances")
    if isinstance(timed, int) and timed != policy.instances:
        how = "slower" if policy.instances > timed else "faster"
        out.append(
            f"{policy.instances} instance(s), calibrated with {timed} running at once: "
            f"batches may run {how} than the calibration's (extrapolated); calibrate with "
            f"{policy.instances}"
        )
    return out


def calibration_line(contention: Contention | None) -> str:
    """How busy the machine was while the calibration was measured, in one line."""
    if contention is None:
        return "calibration's contention unknown (measured before OpScope recorded it)"
    if contention.busy:
        return f"calibrated busy: {'; '.join(contention.reasons())} - predictions may be off"
    return f"calibrated quiet: others used {contention.others_cpu:.2f} of {contention.cpus} CPUs"


def flags(
    offered_rate: float, summary: dict[str, Any], service: ServiceModel, policy: BatchPolicy
) -> dict[str, Any]:
    """{"past_capacity", "utilisation", "flags": the sentences to show (past capacity, out
    of the calibrated range, calibrated busy)}."""
    used = utilisation(offered_rate, summary, service, policy)
    past = past_capacity(offered_rate, summary, used)
    said = ([PAST_CAPACITY] if past else []) + range_flags(service, policy)
    if service.contention is not None and service.contention.busy:
        said.append(calibration_line(service.contention))
    return {
        "past_capacity": past,
        "utilisation": None if not math.isfinite(used) else round(used, 4),
        "flags": said,
    }


def rate_text(rate: float) -> str:
    """A rate with three digits that matter: 1.43/s, 12.6/s, 1,250/s (a slow model's max
    rate of 1.4/s read "1/s" beside a curve whose 1.2/s point missed the SLO)."""
    if not math.isfinite(rate):
        return "-"
    return f"{rate:,.0f}/s" if rate >= 100 else f"{rate:.3g}/s"


def max_rate_text(rate: float | None, beyond: bool = False) -> str:
    """The max rate under the SLO as the panel and the CLI say it."""
    if rate is None:
        return ""
    if rate <= 0:
        return "no rate on the curve meets the SLO"
    if beyond:
        return f"max rate under the SLO at least {rate_text(rate)} (every rate simulated meets it)"
    return f"max rate under the SLO {rate_text(rate)}"


def calibration_drift(service: ServiceModel) -> float:
    """How far the calibration's own batch times moved while it was timed: per size (in
    the order its batches ran, 9 or more), the last third's median over the first third's,
    less 1; the median over sizes of its size (0.08: 8%; NaN: too few batches). Without two
    real runs of a row, the nearest thing to the real system's repeat spread."""
    moves = []
    for n in service.sizes:
        v = service.samples[n]
        third = v.size // 3
        if third >= 3:
            a, b = float(np.median(v[:third])), float(np.median(v[-third:]))
            if a > 0:
                moves.append(abs(b / a - 1))
    return float(np.median(moves)) if moves else math.nan
