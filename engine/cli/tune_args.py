"""The `tune` command line."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from engine.cli.arg_types import int_in, positive_ms, seconds, seed
from engine.cli.common import add_json_flag, add_seed_flag, add_session_flag
from engine.cli.remote_cmd import add_host_flag


def add_tune_parser(sub: Any, add_knobs: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser(
        "tune",
        help="search configs on the real engine: every trial timed and recorded, the "
        "Pareto fronts, the best config that meets the floor and the command for it",
    )
    p.add_argument("model", help="an .onnx file (or a PyTorch file)")
    add_knobs(p)
    p.add_argument(
        "--space", action="append", default=[], metavar="KNOB=V1,V2",
        help="values to try (repeatable; knobs engine, precision, fusion, batch, threads, "
        "spinning; default: precision fp32, int8-dynamic, int8-static x fusion basic, all)",
    )  # fmt: skip
    p.add_argument(
        "--objective", choices=("p50", "p99", "throughput"), default="p50",
        help="what the best config minimizes (p50, p99) or maximizes (throughput)",
    )  # fmt: skip
    p.add_argument("--slo-p99", type=positive_ms, metavar="MS", help="a p99 ceiling (ms)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--exhaustive", action="store_true", help="every config (the default)")
    g.add_argument(
        "--budget", type=int_in(1, 100_000), metavar="N",
        help="at most N trials, chosen by optuna's TPE sampler",
    )  # fmt: skip
    p.add_argument(
        "--duration", type=seconds, default=3.0, metavar="S",
        help="seconds of timing per trial (default 3)",
    )  # fmt: skip
    add_json_flag(p)
    add_session_flag(p, "record every trial's run in a session file")
    p.add_argument("--search-seed", type=seed, default=0, help="seed of the sampler")
    p.add_argument(
        "--no-recheck", dest="recheck", action="store_false",
        help="pick the best trial by its own timing (default: the best 3 feasible trials "
        "are re-checked side by side, in interleaved rounds, before the pick)",
    )  # fmt: skip
    p.add_argument(
        "--ray", metavar="ADDRESS",
        help="run trials on a Ray cluster, one per node at a time (HOST:PORT from a node of "
        "the cluster, ray://HOST:10001 from elsewhere, or auto); needs opscope[ray]",
    )  # fmt: skip
    add_host_flag(p)
    p.set_defaults(handler=_cmd_tune)


def _cmd_tune(args: argparse.Namespace) -> int:
    if args.host:
        from engine.cli.remote_cmd import cmd_remote

        return cmd_remote(args)
    from engine.cli.tune_cmds import cmd_tune

    return cmd_tune(args)


def add_sweep_parser(sub: Any, add_knobs: Any) -> None:
    p = sub.add_parser(
        "sweep",
        help="time and profile a model across sizes of one dim (e.g. sequence) and fit how "
        "each op type's time grows (time ~ size^k)",
    )
    p.add_argument("model", help="an .onnx file")
    add_knobs(p)
    p.add_argument(
        "--vary", required=True, metavar="DIM=V1,V2,...",
        help="a symbolic dim (every input that has it), e.g. sequence=64,128,256,512; or "
        "one input's shape, e.g. input_ids=1x64,1x128",
    )  # fmt: skip
    p.add_argument(
        "--duration", type=seconds, default=2.0, metavar="S",
        help="seconds of timing per point (default 2)",
    )  # fmt: skip
    p.add_argument(
        "--runs", type=int_in(1, 100_000), default=10, help="profiled inferences per point"
    )
    add_seed_flag(p, "seed for generated inputs")
    add_json_flag(p)
    add_session_flag(p, "record each point's run")
    add_host_flag(p)
    p.set_defaults(handler=_cmd_sweep)


def _cmd_sweep(args: argparse.Namespace) -> int:
    if args.host:
        from engine.cli.remote_cmd import cmd_remote

        return cmd_remote(args)
    from engine.cli.sweep_cmds import cmd_sweep

    return cmd_sweep(args)
