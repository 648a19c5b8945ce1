"""A report or a trace of a session file, written as a job (engine/run/jobs.py): the window's
File > Export runs it through the one runner, in a process of the engine host's (a long
session's report takes seconds; Cancel stops it, and the output file is replaced atomically,
so a cancelled export leaves what was there)."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import ClassVar

from engine.analysis.export import ExportError, write_trace
from engine.analysis.report import write_report
from engine.events import Event, Progress

KINDS = ("report", "trace")


@dataclass(frozen=True)
class ExportRequest:
    kind: str  # "report" (HTML) or "trace" (Chrome/Perfetto JSON)
    session: str  # the session file read
    out: str  # the file written
    run_id: int | None = None  # a trace of this run only; None: every traceable run
    job_name: ClassVar[str] = "export"


def export_job(req: ExportRequest) -> Generator[Event, None, str]:
    """Writes `req.out`; returns its path. A file that cannot be written is one line."""
    if req.kind not in KINDS:
        raise ExportError(f"no export of kind {req.kind!r} (one of {', '.join(KINDS)})")
    yield Progress("export", 0, None, f"writing the {req.kind} {req.out}")
    try:
        if req.kind == "report":
            write_report(req.session, req.out)
        else:
            write_trace(req.session, req.out, req.run_id)
    except OSError as exc:
        raise ExportError(f"{req.out}: {exc.strerror or exc}") from exc
    return req.out
