"""Errors the user caused or can fix: each renders as one line naming the file and cause.

The CLI maps every `OpScopeError` to exit code 2 with no traceback; anything else is a
genuine internal fault.
"""

from __future__ import annotations

from pathlib import Path


def one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception's message as one line: its first non-empty line, whitespace collapsed,
    control characters escaped, at most `limit` characters (the exception's type when it
    says nothing). Never raises: a library's message may carry bytes from a file."""
    try:
        text = str(exc)
    except Exception:  # a __str__ that fails (bad bytes in its arguments)
        text = ""
    lines = [" ".join(ln.split()) for ln in text.splitlines() if ln.strip()]
    return escape_controls(lines[0][:limit]) if lines else type(exc).__name__


def escape_controls(text: str) -> str:
    """Control and format characters (ANSI escapes, bidi overrides) shown as escapes, so
    text from a file cannot drive the terminal it is printed on."""
    if text.isprintable():
        return text
    out: list[str] = []
    for ch in text:
        if ch.isprintable():
            out.append(ch)
        elif ch in "\n\t\r":
            out.append(repr(ch)[1:-1])
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return "".join(out)


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
