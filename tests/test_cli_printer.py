"""The command line's progress printer: what a sweep or tune repeats per point is said once."""

from __future__ import annotations

import io

from engine.cli.printer import LivePrinter
from engine.events import Notice


def test_an_info_line_is_said_once_and_warnings_every_time() -> None:
    out = io.StringIO()
    printer = LivePrinter(out, live=False)
    for _ in range(3):  # a sweep's three points each resolve the provider
        printer.feed(Notice("info", "provider auto -> cpu (no NVIDIA GPU found)"))
        printer.feed(Notice("warning", "the machine is busy"))
    printer.feed(Notice("info", "another thing"))
    lines = out.getvalue().splitlines()
    assert lines.count("info: provider auto -> cpu (no NVIDIA GPU found)") == 1
    assert lines.count("warning: the machine is busy") == 3
    assert lines[-1] == "info: another thing"
