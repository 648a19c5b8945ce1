"""`opscope report FILE [-o OUT.html]`: a self-contained HTML report of a session."""

from __future__ import annotations

import argparse

from engine.analysis.report import default_output, write_report
from engine.cli.common import EXIT_OK
from engine.session.trust import printable


def cmd_report(args: argparse.Namespace) -> int:
    out = args.output or default_output(args.file)
    write_report(args.file, out)
    print(f"report: {printable(out)}")
    return EXIT_OK
