"""The session file (.opscope): one SQLite file holding runs, raw samples and profiles.

`SessionStore` writes (one writer), `Recorder` turns a run's events into rows,
`open_session_file` reads a possibly untrusted file read-only. The format is documented
in docs/session-format.md.
"""

from __future__ import annotations

from engine.session.reader import SessionReader
from engine.session.recorder import Recorder
from engine.session.recording import recording
from engine.session.refs import open_run, resolve_run_ref
from engine.session.rows import RunRow
from engine.session.schema import MIGRATIONS, SCHEMA_VERSION
from engine.session.store import SessionStore, open_session_file
from engine.session.sweep_rows import SweepRow
from engine.session.timeline_rows import MarkerRow

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "MarkerRow",
    "Recorder",
    "RunRow",
    "SessionReader",
    "SessionStore",
    "SweepRow",
    "open_run",
    "open_session_file",
    "recording",
    "resolve_run_ref",
]
