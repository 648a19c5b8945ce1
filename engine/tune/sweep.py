"""Scaling with input size: the model timed and profiled at each value of one dim (a
symbolic dim such as `sequence`, on every input that has it; or one input's whole shape),
and how each op type's time grows fitted as time ~ size^k (least squares on log-log):
attention's quadratic growth becomes a number, with its error bar (the fit's residuals and
each point's spread over its repeats) and flags where the points did not grow or the error
spans a power (engine/measure/fits.py's power_fit)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.errors import ConfigError
from engine.events import Event, Notice, OpProfile, Progress, TimingDone
from engine.measure.contention import Contention
from engine.measure.fits import PowerFit, power_fit
from engine.model.info import ModelInfo
from engine.model.inputs import plan_inputs
from engine.run.bench import BenchRequest, run_bench

MIN_SHARE = 0.01  # op types below 1% of the time at every size are not fitted


@dataclass
class SweepPoint:
    value: Any  # the dim's size, or the input's shape as "AxB"
    size: float  # what the fit uses: the dim, or the number of elements of the shape
    p50_ms: float
    samples: int
    op_types_ms: dict[str, float] = field(default_factory=dict)
    contention: Contention | None = None  # how busy the machine was while it was timed
    # relative standard errors over repeats: of the p50 (its 95% interval) and of each op
    # type's mean time over the profiled inferences (NaN: unknown)
    p50_rel_err: float = math.nan
    op_types_rel_err: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "size": self.size,
            "latency_ms": self.p50_ms,
            "samples": self.samples,
            "op_types": self.op_types_ms,
            "rel_err": {"latency": _finite(self.p50_rel_err),
                        "op_types": {k: _finite(v) for k, v in self.op_types_rel_err.items()}},
            "machine": {"contention": self.contention.to_json() if self.contention else None},
        }  # fmt: skip


@dataclass
class SweepResult:
    dim: str
    points: list[SweepPoint]
    growth_total: float
    growth: dict[str, float]  # op type -> k
    fits: dict[str, PowerFit] = field(default_factory=dict)  # "total" and op types: k, err, flags

    def to_json(self) -> dict[str, Any]:
        return {
            "vary": {"dim": self.dim, "values": [p.value for p in self.points]},
            "points": [p.to_json() for p in self.points],
            "growth": {
                "total": self.growth_total,
                "op_types": self.growth,
                "fitted_over": "the upper half of the sizes (time ~ size^k, log-log)",
                "points": len(upper_half(self.points)),
                "caveat": growth_caveat(self.points),
                "fits": {k: f.to_json() for k, f in self.fits.items()},
            },
        }


def growth_caveat(points: list[SweepPoint]) -> str | None:
    """What a reader must know about exponents fitted from few points, or from points
    timed on a busy machine."""
    used = len(upper_half(points))
    if len(points) < 2:
        return "no fit: fewer than two points"
    said = []
    if used < 3:
        which = (
            f"{used} points"
            if used == len(points)
            else (
                f"the largest {used} of {len(points)} points (the upper half, where growth shows)"
            )
        )
        said.append(f"fitted from {which}: a line through two always fits; a rough guide")
    busy = [str(p.value) for p in points if p.contention is not None and p.contention.busy]
    if busy:
        said.append(
            f"points {', '.join(busy)} were timed on a busy machine: their latency is the "
            "model's while other work ran, and the exponents bend with it; sweep again quiet"
        )
    return "; ".join(said) or None


def parse_vary(text: str) -> tuple[str, list[str]]:
    name, sep, values = text.partition("=")
    items = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not name.strip() or len(items) < 2:
        raise ConfigError(f"--vary {text!r}: expected DIM=V1,V2,... with two values or more")
    return name.strip(), items


def shapes_at(
    info: ModelInfo,
    batch: int,
    base: dict[str, tuple[int, ...]],
    name: str,
    value: str,
    dims: dict[str, int] | None = None,
) -> tuple[dict[str, tuple[int, ...]], float]:
    """The inputs' shapes with `name` (a symbolic dim, or an input) at `value`, the other
    symbolic dims at `dims` (as the window set them), and the size the fit uses."""
    inputs = {v.name: v for v in info.inputs}
    if name in inputs:  # one input's whole shape, "AxB"
        try:
            shape = tuple(int(x) for x in value.lower().split("x"))
        except ValueError:
            raise ConfigError(f"--vary {name}: {value!r} is not a shape like 1x128") from None
        return {**base, name: shape}, float(np.prod(shape))
    try:
        size = int(value)
    except ValueError:
        raise ConfigError(f"--vary {name}: {value!r} is not a whole number") from None
    if size < 1:
        raise ConfigError(f"--vary {name}: sizes must be 1 or more, got {size}")
    plan = plan_inputs(info, batch, base, {k: v for k, v in (dims or {}).items() if k != name})
    out = dict(plan.shapes)
    hit = False
    for v in info.inputs:
        if v.shape and name in v.shape:
            out[v.name] = tuple(
                size if d == name else s for d, s in zip(v.shape, out[v.name], strict=True)
            )
            hit = True
    if not hit:
        known = sorted({d for v in info.inputs for d in (v.shape or ()) if isinstance(d, str)})
        names = ", ".join([*known, *inputs]) or "none"
        raise ConfigError(f"--vary {name}: the model has no such dim or input ({names})")
    return out, float(size)


def sweep(
    req: BenchRequest, info: ModelInfo, name: str, values: list[str]
) -> Generator[Event | SweepPoint, None, SweepResult]:
    """Time and profile the model at each value (events pass through); then fit."""
    points: list[SweepPoint] = []
    config, given = req.workload.config, req.workload.inputs
    dims = {k: v for k, v in given.dims.items() if k != name}
    sized = [shapes_at(info, config.batch, dict(given.shapes), name, v, dims) for v in values]
    check_points(info, name, values, [shapes for shapes, _ in sized])
    if config.precision.startswith("int8") and req.variant_shapes is None:
        # one variant serves every size (its quantization does not depend on them): built
        # and checked against the accuracy target once, at the shapes the sweep started from
        at = plan_inputs(info, config.batch, dict(given.shapes), dict(given.dims)).shapes
        req = dataclasses.replace(req, variant_shapes=dict(at))
        shown = ", ".join(f"{k} {'x'.join(map(str, v))}" for k, v in at.items())
        yield Notice("info", f"{config.precision}: one variant for every {name}, "
                     f"calibrated and checked at {shown}")  # fmt: skip
    for i, (value, (shapes, size)) in enumerate(zip(values, sized, strict=True)):
        yield Progress("sweep", i, len(values), f"{name} = {value}")
        point = SweepPoint(value if name in {v.name for v in info.inputs} else int(value), size,
                           math.nan, 0)  # fmt: skip
        at_point = req.workload.with_inputs(dataclasses.replace(given, shapes=shapes, dims=dims))
        run = dataclasses.replace(req, workload=at_point, profile=True, check_accuracy=False)
        for ev in run_bench(run):
            if isinstance(ev, TimingDone):
                point.p50_ms, point.samples = ev.latency.p50, ev.latency.count
                point.contention = ev.contention
                point.p50_rel_err = _p50_rel_err(ev.latency.p50_ci)
            elif isinstance(ev, OpProfile):
                point.op_types_ms = {s.name: s.time_ms for s in ev.op_types}
                point.op_types_rel_err = _op_types_rel_err(ev.trace)
            yield ev
        points.append(point)
        yield point
    return result_of(name, points)


def check_points(
    info: ModelInfo, name: str, values: list[str], shapes: list[dict[str, tuple[int, ...]]]
) -> None:
    """Each point's inputs and one inference on them estimated before any point runs: a
    value that cannot fit in memory, or whose sizes the model's shape inference refuses
    where the smallest point's pass, is refused in one line naming it."""
    if Path(info.path).suffix.lower() != ".onnx":
        return  # a PyTorch file: its ONNX export is checked as each point builds it
    import onnx

    from engine.model.memory_need import check_need

    try:
        model = onnx.load(info.path, load_external_data=False)
    except Exception:  # unreadable here: the run says so in its own words
        return
    sizes = [sum(math.prod(s) for s in point.values()) for point in shapes]
    smallest = shapes[sizes.index(min(sizes))]
    for value, point in zip(values, shapes, strict=True):
        check_need(model, info, point, f"--vary {name}={value}", None if point == smallest
                   else smallest)  # fmt: skip


def result_of(name: str, points: list[SweepPoint]) -> SweepResult:
    """The points with their fit; with fewer than two points (a sweep interrupted early)
    nothing is fitted (k NaN)."""
    if len(points) < 2:
        return SweepResult(name, points, math.nan, {})
    fits = growth_fits(points)
    return SweepResult(name, points, *_exponents(fits), fits)


TOTAL = "total"


def fit(points: list[SweepPoint]) -> tuple[float, dict[str, float]]:
    """k of the total and of each op type that matters (`growth_fits`' exponents)."""
    return _exponents(growth_fits(points))


def _exponents(fits: dict[str, PowerFit]) -> tuple[float, dict[str, float]]:
    return fits[TOTAL].k, {t: f.k for t, f in fits.items() if t != TOTAL}


def growth_fits(points: list[SweepPoint]) -> dict[str, PowerFit]:
    """k of time ~ size^k for the total and each op type that matters ("total" and the op
    types' names), fitted over the upper half of the sizes: at small sizes fixed costs
    (thread dispatch, small kernels) hide the growth (the demo transformer's Softmax: k
    1.35 over 32..512, 1.61 over 128..512); every point is checked for growth."""
    upper = {id(p) for p in upper_half(points)}
    used = [id(p) in upper for p in points]
    sizes = [p.size for p in points]
    labels = [str(p.value) for p in points]
    fits = {TOTAL: power_fit(sizes, [p.p50_ms for p in points],
                             [p.p50_rel_err for p in points], used, labels)}  # fmt: skip
    types = sorted({t for p in points for t in p.op_types_ms})
    sums = np.array([sum(p.op_types_ms.values()) or 1.0 for p in points])
    for t in types:
        times = np.array([p.op_types_ms.get(t, math.nan) for p in points])
        if np.nanmax((times / sums)[used]) < MIN_SHARE:
            continue
        spread = [p.op_types_rel_err.get(t, math.nan) for p in points]
        fits[t] = power_fit(sizes, times, spread, used, labels)
    return fits


def _p50_rel_err(ci: tuple[float, float] | None) -> float:
    """The p50's relative standard error from its 95% interval (NaN: none)."""
    if ci is None or ci[0] <= 0 or ci[1] <= 0:
        return math.nan
    return math.log(ci[1] / ci[0]) / (2 * 1.96)


def _op_types_rel_err(trace: Any) -> dict[str, float]:
    """Each op type's relative standard error of its mean time over the profiled
    inferences (the repeats a profile holds)."""
    runs = len(trace.runs) if trace is not None else 0
    if runs < 2:
        return {}
    per_run: dict[str, np.ndarray] = {}
    for n in trace.nodes:
        per_run.setdefault(n.op_type, np.zeros(runs))[n.run_index] += n.self_us
    return {t: float(np.std(v, ddof=1) / np.sqrt(runs) / np.mean(v))
            for t, v in per_run.items() if np.mean(v) > 0}  # fmt: skip


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None


def upper_half(points: list[SweepPoint]) -> list[SweepPoint]:
    """The points the fit uses: sizes at or above the median (all of them, up to two)."""
    if len(points) <= 2:
        return points
    middle = float(np.median([p.size for p in points]))
    return [p for p in points if p.size >= middle]
