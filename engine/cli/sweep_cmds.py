"""`opscope sweep`: the model timed and profiled across sizes of one dim, with how each
op type's time grows."""

from __future__ import annotations

import argparse
import math
import sys
from typing import TextIO

from engine import backends
from engine.cli.common import EXIT_OK, workload_of, write_json
from engine.cli.printer import LivePrinter
from engine.events import Notice, Progress, drive
from engine.tune.sweep import (
    SweepPoint,
    SweepResult,
    growth_caveat,
    parse_vary,
    result_of,
)
from engine.tune.sweep_job import SweepRequest, SweepStored, sweep_job


def cmd_sweep(args: argparse.Namespace) -> int:
    name, values = parse_vary(args.vary)
    backends.describe_model(args.model)  # a bad model: one line, before the header
    job = SweepRequest.of(
        workload_of(args), name, values, args.session, args.duration, args.runs, args.seed
    )
    printer = LivePrinter(live=False)
    out = sys.stdout if args.json != "-" else sys.stderr
    out.write(f"sweep      {name} over {', '.join(values)} ({args.duration:g} s per point)\n")
    points: list[SweepPoint] = []

    def show(item: object) -> None:
        if isinstance(item, SweepPoint):
            points.append(item)
            if args.json and args.json != "-":  # a script may plot it point by point
                write_json(args.json, {**result_of(name, points).to_json(), "partial": True})
            _point_line(item, out)
        elif isinstance(item, SweepStored):
            partial = f", partial: {item.points} of {item.of} points" if item.partial else ""
            out.write(f"session    sweep {item.sweep_id} stored in {args.session}{partial}\n")
        elif isinstance(item, Progress | Notice):
            printer.feed(item)

    try:
        try:
            result: SweepResult = drive(sweep_job(job), show)
        except KeyboardInterrupt:
            if len(points) >= 2:  # what the points done say, caveats included
                _growth(result_of(name, points), out)
            raise
    finally:
        printer.close()
    _growth(result, out)
    if args.json:
        write_json(args.json, result.to_json())
    return EXIT_OK


def _point_line(p: SweepPoint, out: TextIO) -> None:
    top = sorted(p.op_types_ms.items(), key=lambda kv: -kv[1])[:3]
    ops = ", ".join(f"{k} {v:.3f}" for k, v in top)
    busy = "  [BUSY]" if p.contention is not None and p.contention.busy else ""
    out.write(
        f"point      {p.value!s:>8}: p50 {p.p50_ms:8.3f} ms (n={p.samples}){busy}; "
        f"top ops ms: {ops}\n"
    )
    out.flush()


def _growth(r: SweepResult, out: TextIO) -> None:
    def k(name: str, v: float) -> str:  # k +- its error bar, and what makes it doubtful
        fit = r.fits.get(name)
        if fit is None:
            return "n/a" if math.isnan(v) else f"{v:.2f}"
        return fit.text() + (f"  [{'; '.join(fit.flags)}]" if fit.flags else "")

    out.write(f"growth     total ~ {r.dim}^{k('total', r.growth_total)}\n")
    caveat = growth_caveat(r.points)
    if caveat:
        out.write(f"           ({caveat})\n")
    ranked: list[tuple[str, float]] = sorted(
        r.growth.items(), key=lambda kv: -(kv[1] if not math.isnan(kv[1]) else -9)
    )
    for name, v in ranked:
        out.write(f"           {name:<24} ~ {r.dim}^{k(name, v)}\n")
