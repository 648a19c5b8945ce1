"""The bodies of `opscope info`, `bench` and `profile`."""

from __future__ import annotations

import argparse
import sys

from engine import backends
from engine.cli.common import EXIT_OK, workload_of, write_json
from engine.cli.printer import LivePrinter, print_info, print_summary
from engine.cli.results import RunResult
from engine.run.bench import BenchRequest, run_bench
from engine.run.timing import TimingPlan
from engine.session.recording import recording


def cmd_info(args: argparse.Namespace) -> int:
    _, info = backends.describe_model(args.model)  # read without running code from it
    print_info(info, sys.stdout, verbose=getattr(args, "verbose", False))
    if args.json:
        write_json(args.json, info.to_json())
    return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    timing = TimingPlan(
        warmup_runs=args.warmup,
        warmup_s=args.warmup_s,
        min_runs=args.min_runs,
        duration_s=args.duration,
    )
    req = BenchRequest(
        workload_of(args), seed=args.seed, timing=timing, profile=args.profile,
        profile_runs=getattr(args, "runs", 20), check_accuracy=not args.no_accuracy,
    )  # fmt: skip
    result = RunResult()
    printer = LivePrinter(live=args.live)
    rec = None
    try:
        with recording(
            args.session,
            model_path=args.model,
            config=req.workload.config,
            kind="profile" if args.profile else "bench",
        ) as record:
            events = run_bench(req)
            if args.session:  # recorded runs keep machine telemetry (CPU, GPU) beside them
                from engine.run.cli_telemetry import RunTelemetry

                events = RunTelemetry().interleave(events)
            for ev in events:
                result.feed(ev)
                printer.feed(ev)
                record(ev)
            rec = getattr(record, "__self__", None)
    finally:
        printer.close()
    if result.profile is not None:
        from engine.machine.peaks import machine_roofs

        provider = result.started.provider_used if result.started else None
        ops = [o for p in (result.phases.values() or [result.profile]) for o in p.ops]
        result.machine = machine_roofs(provider, ops, say=lambda m: print(m, file=sys.stderr))
    top = getattr(args, "top", 15)
    out = sys.stdout if args.json != "-" else sys.stderr
    print_summary(result, out, top=top)
    if args.session:
        run_id = getattr(rec, "run_id", None)  # read after closing: every write landed
        ref = f"{args.session}:{run_id}" if run_id is not None else args.session
        unsaved = getattr(rec, "unsaved", 0)
        lost = f" ({unsaved:,} samples NOT saved: the file stayed locked)" if unsaved else ""
        print(f"recorded   {ref}{lost}", file=out)
    if args.json:
        write_json(args.json, result.to_json(top=None))
    return EXIT_OK
