"""Errors the user caused or can fix: each renders as one line naming the file and cause.

The CLI maps every `OpScopeError` to exit code 2 with no traceback; anything else is a
genuine internal fault.
"""

from __future__ import annotations

from pathlib import Path


def one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception's message as one line: its first non-empty line, whitespace collapsed,
    at most `limit` characters (the exception's type when it says nothing)."""
    lines = [" ".join(ln.split()) for ln in str(exc).splitlines() if ln.strip()]
    return lines[0][:limit] if lines else type(exc).__name__


class OpScopeError(Exception):
    """A clear, user-facing error. `str()` is the one line we show."""

    def __init__(self, message: str, path: str | Path | None = None) -> None:
        self.path = str(path) if path is not None else None
        self.message = message
        super().__init__(f"{self.path}: {message}" if self.path else message)


class ModelError(OpScopeError):
    """The model file is missing, corrupt, invalid or cannot be run by the engine."""


class InputError(OpScopeError):
    """Inputs (shapes, npz files, calibration data) do not fit the model."""


class ConfigError(OpScopeError):
    """A run configuration that cannot be satisfied (bad option value, unknown provider)."""


class SessionFileError(OpScopeError):
    """A session file is not an OpScope session, is corrupt, or is from a newer version."""


class Cancelled(Exception):
    """Raised inside engine work when the consumer asked it to stop."""
