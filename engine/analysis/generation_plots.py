"""The report's figures of one generation run (kind `generate`), as inline SVG: TTFT and
TPOT over the run's time, the prefill/decode split of a mean generation, and the profiled
phases by arithmetic intensity.

Drawn like engine/analysis/report_plots.py (a bare matplotlib Figure, imported lazily);
long series are binned to a bounded number of points (median and p99 per bin), so a run of
a million decode steps still makes a small SVG. Times are seconds from the first timed
generation's start.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from engine.analysis.generation_figures import GenerationFigures, PhaseFigures
from engine.analysis.report_plots import _svg, binned
from engine.session.generation_rows import GenerationRun

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

BINS = 300  # points per series at most
PREFILL, DECODE, P99 = "#4C72B0", "#55A868", "#DD8452"


def timeline_svg(g: GenerationRun) -> str:
    """TTFT of each generation at its start, above TPOT of each decode step at its start."""
    return _svg(_timeline, g, width=9.0, height=3.8, key=f"gen-time-{g.run_id}")


def _timeline(fig: Figure, g: GenerationRun) -> None:
    ttft_ax, tpot_ax = fig.subplots(2, 1, sharex=True)
    t0 = float(g.starts_ns[0]) if g.starts_ns.size else 0.0
    _series(ttft_ax, (g.starts_ns - t0) / 1e9, g.ttft_ns / 1e6, "TTFT", PREFILL)
    _series(tpot_ax, (g.decode_starts_ns() - t0) / 1e9, g.tpot_ns / 1e6, "TPOT", DECODE)
    ttft_ax.set_ylabel("TTFT (ms)")
    tpot_ax.set_ylabel("TPOT (ms)")
    tpot_ax.set_xlabel("time since the first timed generation started (s)")


def _series(ax: Axes, t: np.ndarray, ms: np.ndarray, name: str, color: str) -> None:
    if not ms.size:
        ax.text(0.5, 0.5, f"no {name} sample", ha="center", transform=ax.transAxes)
        return
    x, p50, p99 = binned(t.astype(np.float64), ms.astype(np.float64), bins=BINS)
    if x.size < t.size:
        ax.plot(x, p99, color=P99, linewidth=0.8, label="p99 per bin")
        ax.plot(x, p50, color=color, linewidth=1.1, label="p50 per bin")
    else:
        ax.plot(x, p50, color=color, linewidth=0, marker="o", markersize=2, label=name)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7, frameon=False, loc="upper right")


def split_svg(f: GenerationFigures) -> str:
    """One stacked bar: a mean generation's TTFT (prefill and the first token), then the
    sum of its decode steps."""
    return _svg(_split, f, width=9.0, height=1.6, key=f"gen-split-{f.run_id}")


def _split(fig: Figure, f: GenerationFigures) -> None:
    ax = fig.add_subplot()
    decode = f.mean_decode_ms if math.isfinite(f.mean_decode_ms) else 0.0
    total = f.mean_ttft_ms + decode
    for left, width, color, name in (
        (0.0, f.mean_ttft_ms, PREFILL, "prefill (TTFT)"),
        (f.mean_ttft_ms, decode, DECODE, "decode steps"),
    ):
        share = width / total if total > 0 else math.nan
        ax.barh(0, width, left=left, color=color, height=0.6,
                label=f"{name}: {width:.3f} ms ({share:.0%})")  # fmt: skip
    ax.set_yticks([])
    ax.set_xlabel("mean time of one generation (ms)")
    ax.set_xlim(0, total * 1.02 if total > 0 else 1.0)
    ax.grid(axis="y", visible=False)
    fig.legend(fontsize=7, frameon=False, loc="outside upper center", ncols=2)


def phases_svg(run_id: int, phases: Sequence[PhaseFigures]) -> str:
    """Each profiled phase at its arithmetic intensity and achieved GFLOP/s (log-log)."""
    return _svg(_phases, phases, width=5.0, height=3.0, key=f"gen-phases-{run_id}")


def _phases(fig: Figure, phases: Sequence[PhaseFigures]) -> None:
    ax = fig.add_subplot()
    colors = {"prefill": PREFILL, "decode": DECODE}
    drawn = [p for p in phases if p.intensity > 0 and p.gflops_per_s > 0]
    for p in drawn:
        text = f"{p.name}: {p.intensity:.2f} FLOP/B, {p.gflops_per_s:.1f} GFLOP/s"
        ax.scatter([p.intensity], [p.gflops_per_s], color=colors.get(p.name, P99), s=30, label=text)
    if not drawn:
        ax.text(0.5, 0.5, "no phase with FLOPs and bytes", ha="center", transform=ax.transAxes)
        return
    xs = [p.intensity for p in drawn]
    ys = [p.gflops_per_s for p in drawn]
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(min(xs) / 4, max(xs) * 4)
    ax.set_ylim(min(ys) / 4, max(ys) * 4)
    ax.set_xlabel("arithmetic intensity (FLOP/byte, log)")
    ax.set_ylabel("achieved GFLOP/s (log)")
    ax.legend(fontsize=7, frameon=False, loc="upper left")
