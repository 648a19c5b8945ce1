"""Report and trace exports from the menu: engine functions, errors as one line of text."""

from __future__ import annotations

from engine.errors import OpScopeError


def export_report(session_path: str, out_path: str) -> str | None:
    """Write the HTML report; the error text on failure, None on success."""
    from engine.analysis.report import write_report

    try:
        write_report(session_path, out_path)
    except (OpScopeError, OSError) as exc:
        return str(exc)
    return None


def export_trace(session_path: str, out_path: str, run_id: int | None = None) -> str | None:
    """Write a Chrome/Perfetto trace of the last profiled run; the error text on failure."""
    from engine.analysis.export import write_trace

    try:
        write_trace(session_path, out_path, run_id)
    except (OpScopeError, OSError) as exc:
        return str(exc)
    return None
