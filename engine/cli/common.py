"""What every CLI command shares: exit codes, the config from the knobs, --json output."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from engine import backends
from engine.cli.arg_types import seed
from engine.config import DEFAULT_MIN_COSINE, RunConfig
from engine.model.workload import Workload

EXIT_OK = 0
EXIT_FAULT = 1
EXIT_BAD_INPUT = 2
EXIT_REGRESSION = 3  # compare, gate: a regression beyond the threshold
EXIT_INCONCLUSIVE = 4  # compare, gate: no verdict (a busy machine, other shapes)
EXIT_INTERRUPTED = 130


def config_from_args(args: argparse.Namespace) -> RunConfig:
    engine = getattr(args, "engine", backends.DEFAULT)
    model = getattr(args, "model", None)
    return RunConfig(
        engine=backends.engine_for(model, engine) if isinstance(model, str) else engine,
        precision=args.precision,
        fusion=args.fusion,
        batch=args.batch,
        threads=args.threads,
        spinning=args.spinning == "on",
        provider=args.provider,
        min_cosine=getattr(args, "min_cosine", DEFAULT_MIN_COSINE),
    )


def workload_of(args: argparse.Namespace, config: RunConfig | None = None) -> Workload:
    """The command's model at `config` (None: the knobs') on its inputs (--shape, --dim,
    --inputs, --calibration, --labels, --tokenizer): what its job request carries."""
    return Workload.from_args(args.model, config or config_from_args(args), args)


def add_json_flag(p: argparse._ActionsContainer, what: str = "the result") -> None:
    """--json PATH, as every command takes it ('-' is standard output)."""
    p.add_argument("--json", metavar="PATH", help=f"write {what} as JSON ('-': stdout)")


def add_seed_flag(p: argparse._ActionsContainer, what: str, default: int | None = 0) -> None:
    """--seed N, bounded to the seeds numpy takes (0 to 2**32 - 1)."""
    p.add_argument("--seed", type=seed, default=default, help=what)


def add_session_flag(p: argparse._ActionsContainer, what: str) -> None:
    """--session FILE.opscope: the session file the command records into."""
    p.add_argument("--session", metavar="FILE.opscope", help=what)


def write_json(path: str, data: dict[str, Any]) -> None:
    """Write JSON atomically (NaN becomes null); '-' writes to stdout."""
    from engine.files import finite, write_atomic

    text = json.dumps(finite(data), indent=2)
    if path == "-":
        sys.stdout.write(text + "\n")
        return
    write_atomic(path, lambda fh: fh.write(text + "\n"))
