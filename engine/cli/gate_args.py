"""The `gate` command line."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from engine.analysis.deltas import METRICS
from engine.cli.arg_types import int_in, percent, seconds
from engine.cli.common import add_json_flag, add_seed_flag, add_session_flag
from engine.cli.remote_cmd import add_host_flag


def add_gate_parser(sub: Any, add_knobs: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser(
        "gate",
        help="a CI regression gate: run MODEL K times as separate processes and compare "
        "with the baseline's runs (a hierarchical bootstrap: runs, then samples within runs)",
        description="Run MODEL K times, each as its own `opscope bench` process, and fail "
        "(exit 3) only when a metric is worse than BASELINE's runs by more than the "
        "threshold with the stated confidence. Exit 0 pass, 3 regression, 2 bad input, "
        "130 interrupted (the runs recorded so far are kept).",
    )
    p.add_argument(
        "baseline",
        metavar="BASELINE",
        help="a session file (its finished runs of MODEL with this config) or FILE:1,2,3",
    )
    p.add_argument("model", metavar="MODEL", help="an .onnx file (the candidate)")
    add_knobs(p)
    p.add_argument(
        "--runs", type=int_in(1, 1000), default=5, metavar="K",
        help="candidate runs, each a separate process (default 5; 1 cannot see the "
        "spread between processes)",
    )  # fmt: skip
    p.add_argument(
        "--metric", action="append", choices=METRICS, metavar="METRIC",
        help=f"a metric to gate (repeatable; {', '.join(METRICS)}; default p50)",
    )  # fmt: skip
    p.add_argument(
        "--max-regression", type=percent, default=5.0, metavar="PCT",
        help="fail when the candidate is worse by more than PCT percent (default 5)",
    )  # fmt: skip
    p.add_argument(
        "--confidence", type=_confidence, default=0.95, metavar="C",
        help="one-sided confidence that the slowdown exceeds the threshold (default 0.95)",
    )  # fmt: skip
    p.add_argument(
        "--duration", type=seconds, default=3.0, metavar="S",
        help="minimum seconds of timed inferences per run (default 3)",
    )  # fmt: skip
    p.add_argument(
        "--min-runs", type=int_in(1, 10_000_000), default=50, metavar="N",
        help="minimum timed inferences per run (default 50)",
    )  # fmt: skip
    p.add_argument(
        "--warmup", type=int_in(0, 1_000_000), default=10, metavar="N",
        help="warm-up inferences discarded per run (default 10, and at least 0.5 s)",
    )  # fmt: skip
    add_seed_flag(p, "input and bootstrap seed (default 0)")
    add_session_flag(
        p,
        "record the candidate runs here (default: beside --junit, else a new file in "
        "the temporary folder)",
    )
    p.add_argument("--junit", metavar="PATH", help="write a JUnit XML report")
    p.add_argument("--summary", metavar="PATH", help="write a Markdown summary")
    add_json_flag(p)
    add_host_flag(p)
    p.set_defaults(handler=_cmd_gate)


def _confidence(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.5 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be within [0.5, 1), got {text}")
    return value


def _cmd_gate(args: argparse.Namespace) -> int:
    if args.host:
        from engine.cli.remote_cmd import cmd_remote

        return cmd_remote(args)
    from engine.cli.gate_cmds import cmd_gate

    return cmd_gate(args)
