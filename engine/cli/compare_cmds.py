"""`opscope compare BASELINE CANDIDATE`: latency, throughput and per-op deltas of two runs,
with bootstrap confidence intervals, and a regression gate for CI scripts.

Exit codes: 0 no significant regression beyond `--max-regression`; 3 a regression (the
interval's lower bound of the slowdown exceeds the threshold); 4 inconclusive: no verdict,
because a side was measured on a busy machine (the candidate reads slower, or the baseline
was busy and could hide a regression) or the runs are not like for like (other input
shapes or batch, another kind of latency); 2 bad input.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from engine.analysis.deltas import METRICS, MetricDelta, OpDiff
from engine.analysis.run_compare import PER_INFERENCE, RunComparison, load_changes
from engine.analysis.run_sets import compare_set_refs
from engine.analysis.run_summary import summarize
from engine.cli.common import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_REGRESSION, write_json
from engine.session.rows import RunRow
from engine.session.trust import printable

NAME_WIDTH = 36


def cmd_compare(args: argparse.Namespace) -> int:
    comp = compare_set_refs(args.baseline, args.candidate, args.metric, METRICS, seed=args.seed)
    out = sys.stdout if args.json != "-" else sys.stderr
    print_comparison(comp, args.max_regression, out, top=args.top)
    if args.json:
        write_json(args.json, comp.to_json(args.max_regression))
    return EXIT_CODES[comp.status(args.max_regression)]


EXIT_CODES = {
    "ok": EXIT_OK,
    "regression": EXIT_REGRESSION,
    "inconclusive": EXIT_INCONCLUSIVE,
    "unlike": EXIT_INCONCLUSIVE,
}


def print_comparison(comp: RunComparison, threshold: float, out: TextIO, top: int = 15) -> None:
    """Runs, what changed, a metric table with intervals, the per-op diff and a verdict.
    Text from the files goes through `printable`."""
    for label, ref, run in (
        ("baseline", comp.baseline_ref, comp.baseline),
        ("candidate", comp.candidate_ref, comp.candidate),
    ):
        out.write(f"{label:<10} {printable(ref)}  {describe_run(run)}\n")
    changed = "; ".join(
        f"{printable(k)} {_fmt(a)} -> {_fmt(b)}" for k, (a, b) in comp.config_diff.items()
    )
    out.write(f"{'changed':<10} {changed or 'nothing (same config, model, inputs and provider)'}\n")
    load = load_line(comp)
    if load:
        out.write(f"{'load':<10} {load}\n")
    kb, kc = comp.latency_kind
    if kb != kc:
        out.write(f"{'latency':<10} baseline {kb}; candidate {kc}: not like for like\n")
    acc = accuracy_line(comp.accuracy_delta)
    if acc:
        out.write(f"{'accuracy':<10} {acc}\n")
    out.write("\n")
    _print_metrics(comp, out)
    if comp.ops:
        out.write("\n")
        _print_ops(comp, out, top)
    for note in comp.notes:
        out.write(f"note: {printable(note)}\n")
    for line in comp.busy:
        out.write(f"{'machine':<10} {printable(line)}\n")
    out.write(comparison_verdict(comp, threshold) + "\n")


def comparison_verdict(comp: RunComparison, threshold: float) -> str:
    """The verdict line: like for like and quiet, the statistics decide (`verdict`);
    otherwise why there is none."""
    status = comp.status(threshold)
    if status == "unlike":
        return (
            f"NO VERDICT: not like for like ({printable('; '.join(comp.unlike))}); "
            f"the {comp.metric} delta above compares different work"
        )
    if status == "inconclusive":
        said = verdict(comp.gate, threshold).split(": ", 1)[-1]
        return (
            f"INCONCLUSIVE: {said}; measured on a busy machine, so contention explains a "
            "difference as well as the change does: measure both again when it is quiet"
        )
    return verdict(comp.gate, threshold)


def load_line(comp: RunComparison) -> str:
    """What changed in the load of two serving runs ('' unless both are serving runs):
    'traffic: poisson:200 -> bursts:100,600,1,0.3; max batch 1 -> 4'."""
    if PER_INFERENCE in comp.latency_kind:
        return ""
    changes = load_changes(comp.load_diff)
    return printable("; ".join(changes)) if changes else "same traffic, batching and cache"


def describe_run(run: RunRow) -> str:
    """'sweep 1, batch=4 (profile) · demo_cnn.onnx · image 1x3x64x64 · FP32 fusion=all
    batch=1 threads=2  CPU 224 samples': where it came from and its kind, model and inputs
    first (runs of one config read apart)."""
    s = summarize(run)
    kind = {"load": "  [served under load]", "simulate": "  [SIMULATED]"}.get(s.kind, "")
    came = s.origin if s.origin == s.kind else f"{s.origin} ({s.kind})"
    return (
        f"{printable(came)} · {_clip(printable(s.model), NAME_WIDTH)} · "
        f"{printable(s.inputs)} · {printable(s.config)}  "
        f"{printable(s.provider)}  {s.samples} samples{kind}"
        + ("" if run.status == "ok" else f"  [{printable(run.status)}]")
    )


def accuracy_line(acc: dict[str, Any]) -> str:
    """'cosine 1.00000 -> 0.99780 (-0.00220); max abs err 0 -> 0.0123 (+0.0123)'."""
    b, c = acc.get("baseline") or {}, acc.get("candidate") or {}
    parts = []
    for key, label, fmt in (
        ("cosine", "cosine", ".5f"),
        ("max_abs_err", "max abs err", ".4g"),
        ("top1_agreement", "top-1", ".3f"),
    ):
        if acc.get(key) is not None:
            parts.append(f"{label} {b[key]:{fmt}} -> {c[key]:{fmt}} ({acc[key]:+{fmt}})")
    return "; ".join(parts)


def _print_metrics(comp: RunComparison, out: TextIO) -> None:
    level = f"{comp.gate.confidence:.0%} CI"
    rows: list[tuple[str, ...]] = [("metric", "baseline", "candidate", "delta", level, "")]
    for name, m in comp.metrics.items():
        unit = "samples/s" if m.higher_is_better else "ms"
        rows.append(
            (
                f"{name} {unit}",
                _value(m.baseline),
                _value(m.candidate),
                _pct(m.delta_pct),
                f"[{_pct(m.ci_pct[0])}, {_pct(m.ci_pct[1])}]",
                _direction(m) + ("  <- gate" if name == comp.metric else ""),
            )
        )
    _table(rows, out, right={1, 2, 3})
    g = comp.gate
    if g.runs != (1, 1):
        out.write(
            f"({g.resamples} hierarchical bootstrap resamples of the relative difference: "
            f"{g.runs[0]} / {g.runs[1]} runs drawn with replacement, then blocks of "
            f"{g.block[0]} / {g.block[1]} samples within each; n = {g.n[0]} / {g.n[1]} "
            f"samples, {g.n_bootstrap[0]} / {g.n_bootstrap[1]} per resample)\n"
        )
        return
    out.write(
        f"({g.resamples} circular block-bootstrap resamples of the relative difference; "
        f"n = {g.n[0]} / {g.n[1]} samples"
        + (
            f", bootstrapped on {g.n_bootstrap[0]} / {g.n_bootstrap[1]}"
            if g.n_bootstrap != g.n
            else ""
        )
        + f"; blocks of {g.block[0]} / {g.block[1]})\n"
    )


def _print_ops(comp: RunComparison, out: TextIO, top: int) -> None:
    shown = comp.ops[:top]
    out.write(f"ops by node, matched by name (top {len(shown)} of {len(comp.ops)} by |Δ time|)\n")
    rows: list[tuple[str, ...]] = [
        ("node", "op type", "base ms", "cand ms", "Δ ms", "Δ %", "share", "Δ bytes")
    ]
    rows += [_op_cells(d) for d in shown]
    _table(rows, out, right={2, 3, 4, 5, 7})
    if comp.op_types:
        types = comp.op_types[:top]
        out.write(f"\nops by op type (top {len(types)} of {len(comp.op_types)} by |Δ time|)\n")
        rows = [("op type", "base ms", "cand ms", "Δ ms", "Δ %", "share", "Δ bytes")]
        rows += [_op_cells(d)[1:] for d in types]
        _table(rows, out, right={1, 2, 3, 4, 6})
    out.write("\n")
    for kind, what in (("node", "nodes"), ("op_type", "op types")):
        for label, diffs in (
            ("removed (baseline only)", comp.removed(kind)),
            ("added (candidate only)", comp.added(kind)),
        ):
            if diffs:
                out.write(f"{what} {label}: {len(diffs)}: {_names(diffs, kind)}\n")


def _op_cells(d: OpDiff) -> tuple[str, ...]:
    share = f"{_share(d.base_share)} -> {_share(d.cand_share)}"
    pct = d.delta_time_pct
    return (
        _clip(printable(d.key), NAME_WIDTH),
        _clip(printable(d.op_type), 28),
        _value(d.base_time_ms),
        _value(d.cand_time_ms),
        f"{d.delta_time_ms:+.3f}",
        "-" if pct is None else f"{pct:+.1f}%",
        share,
        _bytes(d.delta_bytes),
    )


def _names(diffs: Sequence[OpDiff], kind: str, limit: int = 8) -> str:
    items = [
        printable(d.key)
        if kind == "op_type"
        else f"{_clip(printable(d.key), NAME_WIDTH)} ({printable(d.op_type)})"
        for d in diffs[:limit]
    ]
    more = f", … {len(diffs) - limit} more" if len(diffs) > limit else ""
    return ", ".join(items) + more


def verdict(g: MetricDelta, threshold: float) -> str:
    """One line: REGRESSION or OK, with the slowdown, its interval and the threshold."""
    lo, hi = g.slowdown_ci_pct
    ci = f"{g.confidence:.0%} CI of the slowdown {_pct(lo)} .. {_pct(hi)}"
    worse = f"{g.metric} {abs(g.slowdown_pct):.1f}% worse"
    if g.regression(threshold):
        return f"REGRESSION: {worse} ({ci}), beyond the {threshold:g}% threshold"
    if g.significant and g.slowdown_pct > 0:
        return f"OK: {worse} ({ci}), within the {threshold:g}% threshold"
    if g.significant:
        return f"OK: {g.metric} {abs(g.slowdown_pct):.1f}% better ({ci})"
    return f"OK: no significant difference in {g.metric} ({ci})"


def _direction(m: MetricDelta) -> str:
    if not m.significant:
        return "~ same"
    return "worse" if m.slowdown_pct > 0 else "better"


def _table(rows: Sequence[Sequence[str]], out: TextIO, right: set[int]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.write("  ".join(cells).rstrip() + "\n")


def _value(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.1f}" if abs(x) >= 1000 else f"{x:.3f}"


def _pct(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{x:+.1f}%"


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _bytes(n: int) -> str:
    sign = "+" if n > 0 else "-" if n < 0 else ""
    value = float(abs(n))
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{sign}{value:.0f} {unit}" if unit == "B" else f"{sign}{value:.1f} {unit}"
        value /= 1024
    return f"{sign}{value:.1f} GB"  # pragma: no cover


def _fmt(value: Any) -> str:
    if isinstance(value, str) and len(value) == 64:  # a sha256
        return value[:12]
    return printable("-" if value is None else value)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
