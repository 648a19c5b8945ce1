"""The report's figure of one sweep, as inline SVG: time against size on log-log axes, one
line per op type that was fitted plus the total, each labelled with its k (time ~ size^k).

Drawn like engine/analysis/report_plots.py (a bare matplotlib Figure, imported lazily);
labels from the file are printable and never parsed as mathtext.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from engine.analysis.report_plots import _palette, _svg, label
from engine.session.sweep_rows import SweepRow

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_LINES = 10  # op types drawn (the largest at the largest size); the table lists all
TOTAL = "#111827"


def k_text(k: float) -> str:
    return f"k={k:.2f}" if math.isfinite(k) else "k n/a"


def drawn_op_types(s: SweepRow, most: int = MAX_LINES) -> list[str]:
    """The fitted op types, largest time at the largest size first, at most `most`."""
    if not s.points:
        return []
    last = max(s.points, key=lambda p: p.size)
    return sorted(s.growth, key=lambda t: -last.op_types_ms.get(t, 0.0))[:most]


def sweep_svg(s: SweepRow) -> str:
    """Time per inference against size (log-log): the total (median latency) and the
    op types, with k in the legend."""
    return _svg(_sweep, s, width=9.0, height=4.0, key=f"sweep-{s.id}")


def _sweep(fig: Figure, s: SweepRow) -> None:
    ax = fig.add_subplot()
    points = sorted(s.points, key=lambda p: p.size)
    sizes = np.array([p.size for p in points])
    lines = [("total (p50 latency)", [p.latency_ms for p in points], s.growth_total, TOTAL)]
    types = drawn_op_types(s)
    palette = _palette(types)
    lines += [
        (t, [p.op_types_ms.get(t, math.nan) for p in points], s.growth[t], palette[t])
        for t in types
    ]
    for name, times, k, color in lines:
        y = np.array(times, dtype=np.float64)
        ok = np.isfinite(y) & (y > 0)
        if not ok.any():
            continue
        total = color == TOTAL
        ax.plot(sizes[ok], y[ok], marker="o", markersize=3.5 if total else 2.5,
                linewidth=2.0 if total else 1.1, color=color,
                label=f"{label(name, 32)} ({k_text(k)})")  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(sizes, labels=[label(p.value, 12) for p in points], parse_math=False)
    ax.minorticks_off()
    what = "elements of" if any(isinstance(p.value, str) for p in points) else "size of"
    xlabel = ax.set_xlabel(f"{what} {label(s.dim, 40)} (log)")
    xlabel.set_parse_math(False)
    ax.set_ylabel("time per inference (ms, log)")
    title = ax.set_title(
        f"Sweep {s.id}: time ~ {label(s.dim, 40)}^k"
        + (" (partial: interrupted)" if s.status == "partial" else ""),
        loc="left",
    )
    title.set_parse_math(False)
    if ax.get_lines():
        legend = ax.legend(fontsize=7, frameon=False, loc="center left", bbox_to_anchor=(1, 0.5))
        for text in legend.get_texts():
            text.set_parse_math(False)
