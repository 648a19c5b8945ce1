"""`opscope export FILE [--run ID] --trace OUT.json | --csv DIR`: the trace holds each
profiled run's median inference, each serving run's batches and queue depth, and each
generation run's generations with their prefill and decode steps."""

from __future__ import annotations

import argparse
import sys

from engine.analysis.export import write_csv, write_trace
from engine.cli.common import EXIT_OK
from engine.errors import OpScopeError
from engine.session.trust import printable


def cmd_export(args: argparse.Namespace) -> int:
    if not args.trace and not args.csv:
        raise OpScopeError("nothing to export: give --trace OUT.json and/or --csv DIR")
    if args.trace:
        for note in write_trace(args.file, args.trace, args.run):
            print(f"note: {printable(note)}", file=sys.stderr)
        print(
            f"trace: {printable(args.trace)} (open it in https://ui.perfetto.dev or "
            "chrome://tracing)",
            file=sys.stdout,
        )
    if args.csv:
        for path in write_csv(args.file, args.csv, args.run):
            print(f"csv: {printable(str(path))}", file=sys.stdout)
    return EXIT_OK
