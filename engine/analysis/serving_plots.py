"""The report's figures of one serving run (kinds load and simulate), as inline SVG.

Drawn like engine/analysis/report_plots.py (a bare matplotlib Figure per plot, imported
lazily). Every series is binned or thinned to a bounded number of points, so a run of a
million requests still makes a small SVG. Times are seconds from the schedule's start.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.report_plots import FloatArray, _svg, label
from engine.serve.records import OK, REJECTED, TIMED_OUT, ServeRecords, depth_series

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

TIME_BINS = 200  # per time series
PER_BIN = 20  # requests per time bin at least, on average (fewer bins for a short run)
MAX_STEPS = 4000  # queue depth changes drawn exactly; above, the maximum per time bin
WARMUP = "#9ca3af"
P50, P99, TRAFFIC, FAILED = "#4C72B0", "#DD8452", "#55A868", "#C44E52"


def time_bins(t0: float, t1: float, bins: int = TIME_BINS) -> FloatArray:
    """Edges of equal time bins over [t0, t1] (at least 10 ms wide, at most `bins`)."""
    span = max(t1 - t0, 1e-3)
    n = int(max(1, min(bins, math.ceil(span / 0.01))))
    return np.linspace(t0, t0 + span, n + 1)


def latency_per_bin(
    scheduled: FloatArray, latency_ms: FloatArray, edges: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(bin centre, p50, p99) of the latencies of requests due in each bin (NaN: none)."""
    which = np.clip(np.searchsorted(edges, scheduled, side="right") - 1, 0, edges.size - 2)
    order = np.argsort(which, kind="stable")
    which, values = which[order], latency_ms[order]
    starts = np.searchsorted(which, np.arange(edges.size - 1))
    ends = np.searchsorted(which, np.arange(edges.size - 1), side="right")
    p50 = np.full(edges.size - 1, np.nan)
    p99 = np.full(edges.size - 1, np.nan)
    for i, (a, b) in enumerate(zip(starts, ends, strict=True)):
        if b > a:
            p50[i], p99[i] = np.percentile(values[a:b], [50, 99])
    return (edges[:-1] + edges[1:]) / 2, p50, p99


def steady_start(r: ServeRecords, warmup_s: float) -> float:
    """When the figures start: the first request due after the warm-up (as `summarize`)."""
    if not len(r):
        return 0.0
    t0 = float(np.nanmin(r.scheduled))
    steady = r.scheduled[r.scheduled >= t0 + warmup_s]
    return float(steady.min()) if steady.size else math.inf


# -- latency and traffic over time -----------------------------------------------------


def timeline_svg(run_id: int, r: ServeRecords, warmup_s: float, title: str) -> str:
    """End-to-end latency (p50, p99 per time bin) above the traffic that caused it."""
    return _svg(_timeline, r, warmup_s, title, width=9.0, height=4.2, key=f"serve-time-{run_id}")


def _timeline(fig: Figure, r: ServeRecords, warmup_s: float, title: str) -> None:
    lat_ax, traffic_ax = fig.subplots(2, 1, sharex=True, height_ratios=[3, 2])
    sched = r.scheduled[np.isfinite(r.scheduled)]
    end = (
        float(np.nanmax(np.concatenate([sched, r.done[np.isfinite(r.done)]])))
        if sched.size
        else 1.0
    )
    t0 = float(sched.min()) if sched.size else 0.0
    edges = time_bins(t0, end, max(10, min(TIME_BINS, sched.size // PER_BIN)))
    ok = (r.outcome == OK) & np.isfinite(r.done)
    x, p50, p99 = latency_per_bin(r.scheduled[ok], (r.done[ok] - r.scheduled[ok]) * 1e3, edges)
    lat_ax.plot(x, p99, color=P99, linewidth=1, label="p99 per bin")
    lat_ax.plot(x, p50, color=P50, linewidth=1.2, label="p50 per bin")
    lat_ax.set_ylabel("end-to-end latency (ms)")
    lat_ax.set_ylim(bottom=0)
    title_text = lat_ax.set_title(label(title, 110), loc="left")
    title_text.set_parse_math(False)
    width = np.diff(edges)
    offered = np.histogram(sched, edges)[0] / width
    traffic_ax.stairs(offered, edges, color=TRAFFIC, fill=True, alpha=0.45, label="offered (due)")
    failed = (r.outcome == REJECTED) | (r.outcome == TIMED_OUT)
    if failed.any():
        lost = np.histogram(r.scheduled[failed], edges)[0] / width
        traffic_ax.stairs(lost, edges, color=FAILED, linewidth=1, label="rejected or timed out")
    traffic_ax.set_ylabel("requests/s")
    traffic_ax.set_xlabel("time since the schedule started (s)")
    top = float(offered.max()) if offered.size else 0.0
    traffic_ax.set_ylim(0, top * 1.35 if top > 0 else 1.0)  # room for the legend
    for ax in (lat_ax, traffic_ax):
        _shade_warmup(ax, t0, warmup_s, edges, legend=ax is lat_ax)
        ax.legend(fontsize=7, frameon=False, loc="upper right")


def _shade_warmup(
    ax: Axes, t0: float, warmup_s: float, edges: FloatArray, legend: bool = True
) -> None:
    if warmup_s > 0:
        ax.axvspan(
            t0, min(t0 + warmup_s, float(edges[-1])), color=WARMUP, alpha=0.18, linewidth=0,
            label=f"warm-up ({warmup_s:g} s, not in the figures)" if legend else None,
        )  # fmt: skip


# -- queue depth and batch sizes -------------------------------------------------------


def depth_points(r: ServeRecords, steps: int = MAX_STEPS) -> tuple[FloatArray, FloatArray, bool]:
    """(t, depth, exact): every change of the queue depth, or, when there are more than
    `steps`, the maximum depth per time bin (so a spike is never thinned away)."""
    t, d = depth_series(r)
    if t.size <= steps:
        return t, d.astype(np.float64), True
    edges = time_bins(float(t[0]), float(t[-1]), steps // 4)
    which = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, edges.size - 2)
    peak = np.full(edges.size - 1, -np.inf)
    np.maximum.at(peak, which, d.astype(np.float64))
    # a bin without a change keeps the depth it was entered with
    for i in range(1, peak.size):
        if not np.isfinite(peak[i]):
            peak[i] = peak[i - 1]
    peak[~np.isfinite(peak)] = 0.0
    return edges[:-1], peak, False


def queue_batches_svg(run_id: int, r: ServeRecords, warmup_s: float, max_batch: int | None) -> str:
    """Queue depth over time (exact), and how many batches of each size ran."""
    return _svg(
        _queue_batches, r, warmup_s, max_batch, width=9.0, height=2.7, key=f"serve-q-{run_id}"
    )


def _queue_batches(fig: Figure, r: ServeRecords, warmup_s: float, max_batch: int | None) -> None:
    depth_ax, hist_ax = fig.subplots(1, 2, width_ratios=[2, 1])
    t, d, exact = depth_points(r)
    if t.size:
        depth_ax.step(t, d, where="post", color=P50, linewidth=0.9,
                      label="queue depth" if exact else "max depth per bin")  # fmt: skip
        t0 = float(np.nanmin(r.scheduled)) if len(r) else 0.0
        _shade_warmup(depth_ax, t0, warmup_s, np.array([t0, float(t[-1])]))
        depth_ax.legend(fontsize=7, frameon=False, loc="upper right")
    else:
        depth_ax.text(0.5, 0.5, "no request ever waited", ha="center", transform=depth_ax.transAxes)
    depth_ax.set_ylim(bottom=0)
    depth_ax.set_xlabel("time since the schedule started (s)")
    depth_ax.set_ylabel("requests waiting")
    depth_ax.yaxis.get_major_locator().set_params(integer=True)
    since = steady_start(r, warmup_s)
    sizes = r.batch_size[r.batch_start >= since]
    top = max(int(sizes.max()) if sizes.size else 1, max_batch or 1)
    counts = np.bincount(sizes, minlength=top + 1)[1:] if sizes.size else np.zeros(top)
    xs = np.arange(1, top + 1)
    hist_ax.bar(xs, counts, color=P50, width=0.8)
    if sizes.size:
        hist_ax.axvline(float(sizes.mean()), color="#222", linestyle=":", linewidth=1,
                        label=f"mean {sizes.mean():.2f}")  # fmt: skip
        hist_ax.legend(fontsize=7, frameon=False, loc="upper right")
    hist_ax.set_xticks(xs if top <= 16 else np.unique(np.linspace(1, top, 9).astype(int)))
    hist_ax.set_xlabel("batch size (after the warm-up)")
    hist_ax.set_ylabel("batches")
    hist_ax.grid(axis="x", visible=False)


# -- the capacity curve ----------------------------------------------------------------


def curve_svg(run_id: int, curve: Sequence[Mapping[str, Any]]) -> str:
    """Offered rate against latency (p50, p99) and against the throughput served."""
    return _svg(_curve, curve, width=9.0, height=2.9, key=f"serve-curve-{run_id}")


def _curve(fig: Figure, curve: Sequence[Mapping[str, Any]]) -> None:
    lat_ax, tp_ax = fig.subplots(1, 2)
    x = np.array([_f(p.get("offered_per_s")) for p in curve])
    p50 = np.array([_f(p.get("p50_ms")) for p in curve])
    p99 = np.array([_f(p.get("p99_ms")) for p in curve])
    tp = np.array([_f(p.get("throughput_per_s")) for p in curve])
    knee = [i for i, p in enumerate(curve) if p.get("knee") is True]
    lat_ax.plot(x, p99, marker="o", markersize=3, color=P99, linewidth=1.2, label="p99")
    lat_ax.plot(x, p50, marker="o", markersize=3, color=P50, linewidth=1.2, label="p50")
    finite = np.concatenate([p50, p99])
    finite = finite[np.isfinite(finite) & (finite > 0)]
    if finite.size and finite.max() / finite.min() > 30:
        lat_ax.set_yscale("log")
    lat_ax.set_xlabel("offered load (requests/s)")
    lat_ax.set_ylabel("end-to-end latency (ms)")
    lat_ax.set_title("Latency against load", loc="left")
    top = float(np.nanmax(np.concatenate([x, tp]))) if x.size else 1.0
    tp_ax.plot([0, top], [0, top], color="#999", linestyle="--", linewidth=0.8,
               label="served = offered")  # fmt: skip
    tp_ax.plot(x, tp, marker="o", markersize=3, color=TRAFFIC, linewidth=1.2, label="served")
    tp_ax.set_xlabel("offered load (requests/s)")
    tp_ax.set_ylabel("throughput (requests/s)")
    tp_ax.set_title("Throughput against load", loc="left")
    tp_ax.set_xlim(left=0)
    tp_ax.set_ylim(bottom=0)
    for i in knee[:1]:
        for ax in (lat_ax, tp_ax):
            ax.axvline(x[i], color=FAILED, linestyle=":", linewidth=1.2,
                       label=f"knee {x[i]:.0f}/s")  # fmt: skip
    for ax in (lat_ax, tp_ax):
        ax.legend(fontsize=7, frameon=False, loc="upper left")


def _f(value: Any) -> float:
    return (
        float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
    )
