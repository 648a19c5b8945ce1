"""`opscope session show FILE[:RUN]`: list a session's runs, one line each."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from typing import TextIO

from engine.cli.common import EXIT_OK, write_json
from engine.config import RunConfig, provider_label
from engine.session import RunRow, resolve_run_ref
from engine.session.reader import SessionReader
from engine.session.trust import printable

MAX_CELL = 40


def cmd_session_show(args: argparse.Namespace) -> int:
    path, run_id = resolve_run_ref(args.ref)
    with SessionReader.open(path) as reader:
        meta = reader.meta()
        runs = reader.runs() if run_id is None else [reader.run(run_id)]
    out = sys.stdout if args.json != "-" else sys.stderr
    print_session(path, meta, runs, out)
    if args.json:
        write_json(args.json, {"meta": meta, "runs": [r.to_json() for r in runs]})
    return EXIT_OK


def print_session(
    path: str, meta: dict[str, str | None], runs: Sequence[RunRow], out: TextIO
) -> None:
    """A header line about the file, then one line per run. Every text that came from the
    file goes through `printable`, so it cannot drive the terminal."""
    machine = ", ".join(printable(v) for v in (meta.get("cpu"), meta.get("gpu")) if v)
    out.write(
        f"session {printable(path)}: {len(runs)} run{'s' if len(runs) != 1 else ''}, "
        f"format v{printable(meta.get('schema_version') or '?')}, created "
        f"{_time(meta.get('created_at'))} on {printable(meta.get('host') or '?')}"
        + (f" ({machine})" if machine else "")
        + "\n"
    )
    if not runs:
        return
    header = (
        "id",
        "started",
        "model",
        "config",
        "provider",
        "p50 ms",
        "p99 ms",
        "samples/s",
        "cosine",
        "status",
    )
    rows = [header, *(_cells(r) for r in runs)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    numeric = {0, 5, 6, 7, 8}
    for row in rows:
        cells = [
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.write("  ".join(cells).rstrip() + "\n")


def _cells(r: RunRow) -> tuple[str, ...]:
    lat, tp = r.latency, r.throughput
    status = printable(r.status)
    if r.error:
        status += ": " + _clip(printable(r.error), 2 * MAX_CELL)
    if lat is None and r.samples:
        status += f" ({r.samples} samples)"
    return (
        str(r.id),
        _time(r.started_at),
        _clip(printable(r.model_name or "?"), MAX_CELL),
        _config(r.config),
        _clip(provider_label(printable(r.provider_used or "-")), MAX_CELL),
        _num(lat.p50 if lat else None, 3),
        _num(lat.p99 if lat else None, 3),
        _num(tp.samples_per_s if tp else None, 1),
        _num(r.accuracy.cosine if r.accuracy else None, 5),
        status,
    )


def _config(c: RunConfig | None) -> str:
    if c is None:
        return "-"
    return c.short_label()


def _time(iso: str | None) -> str:
    """'2026-05-09T07:35:25.123Z' -> '2026-05-09 07:35:25' (UTC, as stored)."""
    if not iso:
        return "-"
    return printable(iso[:19].replace("T", " "))


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
