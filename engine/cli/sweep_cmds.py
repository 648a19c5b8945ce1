"""`opscope sweep`: the model timed and profiled across sizes of one dim, with how each
op type's time grows."""

from __future__ import annotations

import argparse
import math
import sys
from typing import TextIO

from engine import backends
from engine.cli.common import EXIT_OK, config_from_args, write_json
from engine.cli.printer import LivePrinter
from engine.events import Notice, Progress, drive
from engine.run.bench import BenchRequest
from engine.run.job_inputs import JobInputs
from engine.run.timing import TimingPlan
from engine.session.recorder import Recorder
from engine.session.recording import recorder_at
from engine.tune.sweep import (
    SweepPoint,
    SweepResult,
    growth_caveat,
    parse_vary,
    result_of,
    sweep,
)


def cmd_sweep(args: argparse.Namespace) -> int:
    name, values = parse_vary(args.vary)
    _, info = backends.describe_model(args.model)
    inputs = JobInputs.from_args(args)
    req = BenchRequest(
        model_path=args.model,
        config=config_from_args(args),
        timing=TimingPlan(warmup_runs=5, warmup_s=0.2, min_runs=20, duration_s=args.duration),
        shapes=inputs.shapes,
        dims=inputs.dims,
        inputs_npz=inputs.inputs_npz,
        calibration_npz=inputs.calibration_npz,
        seed=args.seed,
        profile_runs=args.runs,
    )
    printer = LivePrinter(live=False)
    out = sys.stdout if args.json != "-" else sys.stderr
    out.write(f"sweep      {name} over {', '.join(values)} ({args.duration:g} s per point)\n")
    points: list[SweepPoint] = []
    run_ids: list[int] = []
    try:
        with recorder_at(args.session, model_path=args.model, kind="profile") as rec:

            def show(item: object) -> None:
                if isinstance(item, SweepPoint):
                    points.append(item)
                    if args.json and args.json != "-":  # the window plots it point by point
                        write_json(
                            args.json, {**result_of(name, points).to_json(), "partial": True}
                        )
                    if rec is not None and rec.settle() and rec.run_id is not None:
                        run_ids.append(rec.run_id)  # written, so its id is the file's
                    _point_line(item, out)
                    return
                if rec is not None:
                    rec.feed(item)  # type: ignore[arg-type]
                if isinstance(item, Progress | Notice):
                    printer.feed(item)

            try:
                result: SweepResult = drive(sweep(req, info, name, values), show)
            except KeyboardInterrupt:
                done = result_of(name, points)
                if rec is not None and points:  # keep what was measured
                    sweep_id = _store(rec, args.model, req, done, run_ids, partial=True)
                    out.write(
                        f"session    sweep {sweep_id} stored in {args.session}, partial: "
                        f"{len(points)} of {len(values)} points\n"
                    )
                if len(points) >= 2:  # what the points done say, caveats included
                    _growth(done, out)
                raise
            if rec is not None:
                sweep_id = _store(rec, args.model, req, result, run_ids, partial=False)
                out.write(f"session    sweep {sweep_id} stored in {args.session}\n")
    finally:
        printer.close()
    _growth(result, out)
    if args.json:
        write_json(args.json, result.to_json())
    return EXIT_OK


def _store(
    rec: Recorder,
    model: str,
    req: BenchRequest,
    result: SweepResult,
    run_ids: list[int],
    partial: bool,
) -> int:
    """The sweep as one row of the session (partial: interrupted, the points done)."""
    rec.settle()
    return rec.store.add_sweep(
        model_path=model,
        dim=result.dim,
        config=req.config.to_json(),
        result=result.to_json(),
        run_ids=run_ids,
        partial=partial,
    )


def _point_line(p: SweepPoint, out: TextIO) -> None:
    top = sorted(p.op_types_ms.items(), key=lambda kv: -kv[1])[:3]
    ops = ", ".join(f"{k} {v:.3f}" for k, v in top)
    out.write(
        f"point      {p.value!s:>8}: p50 {p.p50_ms:8.3f} ms (n={p.samples}); top ops ms: {ops}\n"
    )
    out.flush()


def _growth(r: SweepResult, out: TextIO) -> None:
    def k(v: float) -> str:
        return "n/a" if math.isnan(v) else f"{v:.2f}"

    out.write(f"growth     total ~ {r.dim}^{k(r.growth_total)}\n")
    caveat = growth_caveat(r.points)
    if caveat:
        out.write(f"           ({caveat})\n")
    ranked: list[tuple[str, float]] = sorted(
        r.growth.items(), key=lambda kv: -(kv[1] if not math.isnan(kv[1]) else -9)
    )
    for name, v in ranked:
        out.write(f"           {name:<24} ~ {r.dim}^{k(v)}\n")
