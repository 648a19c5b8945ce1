"""`opscope tune`: run the search, print every trial, the fronts and the best."""

from __future__ import annotations

import argparse
import math
import shlex
import sys
from typing import TYPE_CHECKING, Any, TextIO

from engine import backends
from engine.cli.common import EXIT_OK, config_from_args, workload_of, write_json
from engine.cli.printer import LivePrinter
from engine.errors import ConfigError
from engine.events import Notice, Progress, drive
from engine.model.workload import JobInputs
from engine.tune.search import Goal, TuneResult, tune, tune_result
from engine.tune.space import default_space, parse_space, size
from engine.tune.trial import Trial, bench_argv, trial_busy
from engine.tune.tune_job import TuneRequest, tune_job

if TYPE_CHECKING:
    from engine.tune.ray_trials import RayTrials


def trial_extra(args: argparse.Namespace) -> list[str]:
    """What every trial passes on: shapes, dims and data."""
    return JobInputs.from_args(args).argv()


def cmd_tune(args: argparse.Namespace) -> int:
    backends.describe_model(args.model)  # a file no engine opens: one line, before any trial
    base = config_from_args(args)
    space = parse_space(args.space) if args.space else default_space(base)
    if size(space) > 4096:
        raise ConfigError(f"--space has {size(space):,} configs: narrow it, or set --budget")
    goal = Goal(args.objective, base.min_cosine, args.slo_p99)
    workload = workload_of(args, base)
    if args.ray:  # an address nothing listens at: one line before anything runs
        from engine.tune.ray_trials import check_address

        check_address(args.ray)
    printer = LivePrinter()
    out = sys.stdout if args.json != "-" else sys.stderr
    _header(args, space, out)

    pool: RayTrials | None = None
    if args.ray:
        from engine.tune.ray_trials import RayTrials

        pool = RayTrials(args.ray, workload, args.duration, args.session)
        hosts = ", ".join(f"{host} ({cpus} CPUs)" for host, cpus in pool.nodes)
        out.write(f"ray        {len(pool.nodes)} node(s), one trial each at a time: {hosts}\n")

    finished: list[Trial] = []

    def show(item: object) -> None:
        if isinstance(item, Trial):
            finished.append(item)
            _trial_line(item, goal, out)
        elif isinstance(item, Progress | Notice):
            printer.feed(item)

    budget = None if args.exhaustive else args.budget
    try:
        searched = (
            tune(space, base, goal, pool, budget, args.search_seed)
            if pool is not None
            else tune_job(
                TuneRequest(workload, space, goal, budget, args.duration, args.session,
                            args.search_seed, recheck=args.recheck)
            )
        )  # fmt: skip
        result: TuneResult = drive(searched, show)
    except KeyboardInterrupt:
        printer.close()
        # what finished still answers the question, as far as it went
        done = tune_result(finished, goal, f"interrupted after {len(finished)} trials", size(space))
        _summary(result_json(done, goal, args), out)
        where = " (in the session)" if args.session else ""
        print(f"interrupted: {len(finished)} trials finished{where}", file=sys.stderr)
        raise
    finally:
        printer.close()
        if pool is not None:
            pool.close()
    data = result_json(result, goal, args)
    _summary(data, out)
    if args.session:
        print(f"recorded   {args.session} (a bench run per trial)", file=out)
    if args.json:
        write_json(args.json, data)
    return EXIT_OK


def result_json(result: TuneResult, goal: Goal, args: argparse.Namespace) -> dict[str, Any]:
    best = result.best
    return {
        "model": args.model,
        "objective": goal.objective,
        "min_cosine": goal.min_cosine,
        "slo_p99_ms": goal.slo_p99_ms,
        "searched": result.searched,
        "space_size": result.space_size,
        "pick": result.pick
        or {"line": "the best trial by its own timing" + _why_not_rechecked(result, args)},
        "trials": [t.to_json() for t in result.trials],
        "pareto": {
            "latency_accuracy": result.pareto_latency_accuracy,
            "throughput_p99": result.pareto_throughput_p99,
        },
        "best": None
        if best is None
        else {
            **best.to_json(),
            "command": "opscope "
            + shlex.join(bench_argv(args.model, best.config, trial_extra(args))),
        },
    }


def _why_not_rechecked(result: TuneResult, args: argparse.Namespace) -> str:
    if not getattr(args, "recheck", True):
        return " (--no-recheck)"
    if getattr(args, "ray", None):
        return " (trials on Ray: not re-checked side by side)"
    if result.best is None:
        return ""
    return " (fewer than two feasible trials to re-check)"


def _header(args: argparse.Namespace, space: dict[str, list[Any]], out: TextIO) -> None:
    knobs = "  x  ".join(f"{k} {','.join(_v(v) for v in vals)}" for k, vals in space.items())
    how = (
        f"budget {args.budget} (optuna TPE)"
        if args.budget and not args.exhaustive
        else "exhaustive"
    )
    out.write(f"space      {knobs}  ({size(space)} configs; {how})\n")
    out.write(
        f"goal       best {args.objective} with cosine >= {args.min_cosine:g}"
        + (f" and p99 <= {args.slo_p99:g} ms" if args.slo_p99 else "")
        + f"; {args.duration:g} s of timing per trial\n"
    )
    out.flush()


def _v(value: Any) -> str:
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


def _trial_line(t: Trial, goal: Goal, out: TextIO) -> None:
    label = t.config.short_label()
    if t.status != "ok":
        out.write(f"trial {t.number:>3}  {label:<50} FAILED: {t.error}\n")
    else:
        mark = "" if goal.feasible(t) else "  (misses the floor)"
        if trial_busy(t):
            mark += "  (busy machine)"
        out.write(
            f"trial {t.number:>3}  {label:<50} p50 {t.p50_ms:8.3f} ms  p99 {t.p99_ms:8.3f} ms  "
            f"{t.samples_per_s:9.1f} samples/s  cos {t.cosine:.5f}{mark}\n"
        )
    out.flush()


def _summary(data: dict[str, Any], out: TextIO) -> None:
    p = data["pareto"]
    out.write(
        f"pareto     latency x accuracy: trials {', '.join(map(str, p['latency_accuracy'])) or '-'}"
        f"; throughput x p99: trials {', '.join(map(str, p['throughput_p99'])) or '-'}\n"
    )
    best = data["best"]
    if best is None:
        out.write("best       none meets the floor\n")
        return
    lat = best["latency_ms"]
    cos = best["accuracy"]["cosine"]
    out.write(
        f"best       trial {best['number']}: p50 {lat['p50']:.3f} ms, p99 {lat['p99']:.3f} ms, "
        f"{best['throughput']['samples_per_s']:.1f} samples/s, cosine "
        f"{'n/a' if cos is None or math.isnan(cos) else f'{cos:.5f}'}\n"
        f"picked     {data['pick']['line'].removeprefix('picked ')}\n"
        f"command    {best['command']}\n"
    )
