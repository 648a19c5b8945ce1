"""The report's section on sweeps (`opscope sweep --session`): per sweep, a log-log chart
of time against size (engine/analysis/sweep_plots.py) and a table of each op type's k in
time ~ size^k. Everything from the file is escaped (engine/analysis/report_html.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from engine.analysis import sweep_plots
from engine.analysis.report_html import esc, figure, num, pct, section, table
from engine.session.sweep_rows import SweepPointRow, SweepRow

# Sweeps shown in full (chart and k table), the newest; older ones get one table row each.
# A chart costs ~0.15 s to draw: a file holding 500 sweeps took 112 s to report on.
FULL_SWEEPS = 10


def sweep_section(sweeps: Sequence[SweepRow]) -> str:
    """The whole "Scaling" section ("" when the session holds no sweep)."""
    if not sweeps:
        return ""
    intro = (
        "<p>Each sweep timed and profiled the model at several sizes of one dim and fitted "
        "time ~ size<sup>k</sup> by least squares on log-log axes, over the upper half of "
        "the sizes (fixed costs hide the growth at small sizes): k&nbsp;=&nbsp;1 is linear, "
        "k&nbsp;=&nbsp;2 quadratic (attention's scores). Op types under 1% of the time at "
        "every size are not fitted.</p>"
    )
    full = sweeps[-FULL_SWEEPS:]
    older = sweeps[: len(sweeps) - len(full)]
    return section(
        "sweeps",
        "Scaling",
        intro + _older_table(older) + "".join(_sweep_block(s) for s in full),
    )


def _older_table(older: Sequence[SweepRow]) -> str:
    """One row per sweep beyond the newest FULL_SWEEPS, said so above the table."""
    if not older:
        return ""
    note = (
        f"<p>This session holds {len(older) + FULL_SWEEPS} sweeps: the {FULL_SWEEPS} newest "
        f"are drawn below; the {len(older)} older ones are summarised here, one row each "
        "(<code>opscope session show FILE --json</code> lists every point).</p>"
    )
    rows = [
        (
            str(s.id),
            Path(s.model_path).name if s.model_path else "?",
            s.dim,
            ", ".join(str(v) for v in s.values[:8]) + (", ..." if len(s.values) > 8 else ""),
            s.status,
            _k(s.growth_total),
            ", ".join(f"{n} {_k(k)}" for n, k in s.ranked_growth()[:3]) or "-",
        )
        for s in older
    ]
    head = ("sweep", "model", "dim", "sizes", "status", "total k", "fastest-growing (k)")
    return note + table(head, rows, right={0, 5})


def _sweep_block(s: SweepRow) -> str:
    model = Path(s.model_path).name if s.model_path else "?"
    config = s.config.short_label() if s.config else "?"
    runs = ", ".join(str(i) for i in s.run_ids) or "not recorded"
    partial = (
        f" Interrupted: {len(s.points)} point{'s' if len(s.points) != 1 else ''} done"
        + (", fitted over those." if len(s.points) >= 2 else ", too few to fit.")
        if s.status == "partial"
        else ""
    )
    parts = [
        f"<h3>Sweep {s.id}: {esc(model)}, {esc(s.dim)} over "
        f"{esc(', '.join(str(v) for v in s.values))}</h3>",
        f'<p class="small">{esc(config)}; recorded {esc(s.created_at or "?")}; the '
        f"points' runs: {esc(runs)}.{esc(partial)}</p>",
    ]
    if s.points:
        parts.append(
            figure(
                sweep_plots.sweep_svg(s),
                f"Sweep {s.id}: median time per inference (total) and each op type's "
                "profiled time against the size, log-log; the legend gives k.",
            )
        )
    ends = _ends(s)
    head = ("op type", "k", *(f"ms at {p.value}" for p in ends), "share at the largest")
    parts.append(table(head, _k_rows(s, ends), right=set(range(1, len(head)))))
    return "".join(parts)


def _ends(s: SweepRow) -> list[SweepPointRow]:
    """The smallest and the largest size (one point: that one)."""
    ordered = sorted(s.points, key=lambda p: p.size)
    return [ordered[0], ordered[-1]] if len(ordered) > 1 else ordered


def _k_rows(s: SweepRow, ends: Sequence[SweepPointRow]) -> list[tuple[str, ...]]:
    rows = [("total (p50 latency)", _k(s.growth_total), *(num(p.latency_ms) for p in ends), "-")]
    last = ends[-1] if ends else None
    whole = sum(last.op_types_ms.values()) if last else 0.0
    for name, k in s.ranked_growth():
        ms = last.op_types_ms.get(name) if last else None
        share = pct(ms / whole) if ms is not None and whole > 0 else "-"
        rows.append((name, _k(k), *(num(p.op_types_ms.get(name)) for p in ends), share))
    return rows


def _k(k: float) -> str:
    return f"{k:.2f}" if math.isfinite(k) else "-"
