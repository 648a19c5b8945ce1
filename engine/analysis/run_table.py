"""The runs table, declared once: its columns, in order, with each cell's text, shown by
`session show`, the read-only session window and the HTML report alike (each renderer
escapes and aligns its own way; `brief` columns are those a terminal line has room for).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from engine.analysis.run_summary import RunSummary, cell, inputs_text

__all__ = ["BRIEF", "COLUMNS", "Column", "cells", "inputs_text"]


@dataclass(frozen=True)
class Column:
    name: str
    text: Callable[[RunSummary], str]
    numeric: bool = False  # right-aligned
    brief: bool = True  # in `session show` and the session window, not only the report


def _mean_sd(s: RunSummary) -> str:
    return f"{cell(s.mean_ms)} ± {cell(s.std_ms)}" if s.mean_ms is not None else "-"


def _stable(s: RunSummary) -> str:
    return "-" if s.stable is None else ("yes" if s.stable else "NO")


COLUMNS: tuple[Column, ...] = (
    Column("run", lambda s: str(s.id), numeric=True),
    Column("kind", lambda s: s.kind),
    Column("from", lambda s: s.origin),  # a tune's trial, a sweep's point, live, load...
    Column("started", lambda s: s.started_at),
    Column("model", lambda s: s.model),
    Column("inputs", lambda s: s.inputs),
    Column("config", lambda s: s.config),
    Column("provider", lambda s: s.provider),
    Column("host", lambda s: s.host),
    Column("samples", lambda s: f"{s.samples:,}", numeric=True),
    Column("p50 ms", lambda s: cell(s.p50_ms), numeric=True),
    Column("p90 ms", lambda s: cell(s.p90_ms), numeric=True, brief=False),
    Column("p99 ms", lambda s: cell(s.p99_ms), numeric=True),
    Column("mean ± sd ms", _mean_sd, numeric=True, brief=False),
    Column("samples/s", lambda s: cell(s.samples_per_s, 1), numeric=True),
    Column("stable", _stable, brief=False),
    Column("machine", lambda s: s.machine),
    Column("cosine", lambda s: cell(s.cosine, 5), numeric=True),
    Column("status", lambda s: s.status),
)
BRIEF: tuple[Column, ...] = tuple(c for c in COLUMNS if c.brief)


def cells(s: RunSummary, columns: Sequence[Column] = BRIEF) -> list[str]:
    return [c.text(s) for c in columns]
