"""A trace file dropped on a dock: widgets/trace_drop.py (shared by the Traffic and LLM
Serving rooms, so that neither imports the other)."""

from widgets.trace_drop import TRACE_SUFFIXES, TraceDrops, trace_of

__all__ = ["TRACE_SUFFIXES", "TraceDrops", "trace_of"]
