"""The connections the engine host and the window talk through, either way: wire messages
(engine/run/wire_format.py: JSON of OpScope's own types, never pickles) over a
multiprocessing pipe (the window's own host process) or framed by a 4-byte length over two
file descriptors (a host on another machine, over an SSH session's stdin and stdout). The
format's names are exported here too, for the callers that speak both."""

from __future__ import annotations

import contextlib
import os
import select
import struct
import threading
from typing import Any, Protocol

from engine.run.wire_format import (
    MAX_DEPTH,
    MAX_DIMS,
    MAX_FRAME,
    WIRE_PACKAGE,
    WIRE_VERSION,
    WireError,
    decode,
    encode,
    from_data,
    to_data,
)

__all__ = [
    "MAX_DEPTH",
    "MAX_DIMS",
    "MAX_FRAME",
    "WIRE_PACKAGE",
    "WIRE_VERSION",
    "Channel",
    "PipeConnection",
    "StreamConnection",
    "WireError",
    "as_channel",
    "decode",
    "encode",
    "from_data",
    "to_data",
]

_HEADER = struct.Struct(">I")


class Channel(Protocol):
    """What the engine host and the window talk through: wire messages, either way."""

    def send(self, obj: Any) -> None: ...
    def recv(self) -> Any: ...
    def poll(self, timeout: float = 0.0) -> bool: ...
    def close(self) -> None: ...


def as_channel(conn: Any) -> Channel:
    """A channel as is; a multiprocessing Connection wrapped to carry wire messages."""
    if isinstance(conn, (PipeConnection, StreamConnection)):
        return conn
    return PipeConnection(conn)


class PipeConnection:
    """A multiprocessing Connection that carries wire messages (bytes) instead of pickles:
    the same send/recv/poll/close, so the host loop serves a local or a remote window."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def send(self, obj: Any) -> None:
        self._conn.send_bytes(encode(obj))

    def recv(self) -> Any:
        return decode(self._conn.recv_bytes(MAX_FRAME))

    def poll(self, timeout: float = 0.0) -> bool:
        return bool(self._conn.poll(timeout))

    def close(self) -> None:
        self._conn.close()


class StreamConnection:
    """Wire messages framed by a 4-byte length over two file descriptors (an SSH
    session's stdin and stdout): send/recv/poll/close as a Connection. EOF on the read
    side raises EOFError, as a closed pipe does."""

    def __init__(self, read_fd: int, write_fd: int) -> None:
        self._r, self._w = read_fd, write_fd
        self._send_lock = threading.Lock()

    def send(self, obj: Any) -> None:
        raw = encode(obj)
        if len(raw) > MAX_FRAME:
            raise WireError(f"a message of {len(raw) >> 20} MiB (at most {MAX_FRAME >> 20})")
        with self._send_lock:
            _write_all(self._w, _HEADER.pack(len(raw)) + raw)

    def recv(self) -> Any:
        (size,) = _HEADER.unpack(self._read_exactly(_HEADER.size))
        if size > MAX_FRAME:
            raise WireError(f"a message of {size >> 20} MiB (at most {MAX_FRAME >> 20})")
        return decode(self._read_exactly(size))

    def poll(self, timeout: float = 0.0) -> bool:
        ready, _, _ = select.select([self._r], [], [], timeout)
        return bool(ready)

    def close(self) -> None:
        for fd in {self._r, self._w}:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _read_exactly(self, n: int) -> bytes:
        parts: list[bytes] = []
        while n:
            chunk = os.read(self._r, min(n, 1 << 20))
            if not chunk:
                raise EOFError("the other side closed the connection")
            parts.append(chunk)
            n -= len(chunk)
        return b"".join(parts)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
