"""What a host answers over SSH (`opscope remote ...`), data only: its version and machine
as one JSON line; a file received by content hash into its cache (checked, written whole or
not at all); a result file handed back once and removed. Every name the other side sends
is checked: a hash of 64 hex digits, a plain file name, a result under the host's own
results folder."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import sys
from pathlib import Path
from typing import Any, BinaryIO

from engine import __version__
from engine.cache import cache_root
from engine.errors import ConfigError

PROTOCOL = 1
MAX_FILE = 64 * 2**30  # a model with its weights: 64 GiB at most
MAX_RESULT = 256 * 2**20  # a JSON result
MAX_TAKE = 16 * 2**30  # a session file
CHUNK = 1 << 20  # bytes per read and write of a file sent
_SHA = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^[A-Za-z0-9._+-]{1,200}$")


def received_root() -> Path:
    return cache_root() / "remote" / "files"


def results_root() -> Path:
    return cache_root() / "remote" / "results"


def hello() -> dict[str, Any]:
    """The handshake's answer: version, protocol, this machine, where results go."""
    from engine.hostinfo import cpu_model, gpu_count

    results_root().mkdir(parents=True, exist_ok=True)  # results and sessions land there
    return {
        "opscope": __version__,
        "protocol": PROTOCOL,
        "hostname": platform.node(),
        "cpu": cpu_model(),
        "gpus": gpu_count(),
        "results": str(results_root()),
    }


def receive(sha: str, size: int, name: str, src: BinaryIO, out: Any) -> Path:
    """With the file's sha256 known (`sha`): `{"have": path}` when it is here already.
    Otherwise `{"send": true}`, then exactly `size` bytes read, hashed as they come, kept
    under their hash (checked against `sha` when given; "-": a first send, the sender
    hashes as it sends and compares); `{"stored": path, "sha256": hex}`."""
    if not (sha == "-" or _SHA.match(sha)) or not _NAME.match(name) or name.startswith("."):
        raise ConfigError("remote put: a 64-hex sha256 (or -) and a plain file name are needed")
    if not 0 <= size <= MAX_FILE:
        raise ConfigError(f"remote put: {size} bytes is beyond {MAX_FILE} bytes")
    if sha != "-":
        known = received_root() / sha / name
        if known.is_file() and known.stat().st_size == size:
            _say(out, {"have": str(known)})
            return known
    _say(out, {"send": True})
    incoming = received_root() / "incoming"
    incoming.mkdir(parents=True, exist_ok=True)
    part = incoming / f"{name}.{os.getpid()}.part"
    digest = hashlib.sha256()
    left = size
    try:
        with open(part, "wb") as fh:
            while left:
                block = src.read(min(CHUNK, left))
                if not block:
                    raise ConfigError(f"remote put: the file ended {left} bytes early")
                digest.update(block)
                fh.write(block)
                left -= len(block)
        got = digest.hexdigest()
        if sha not in ("-", got):
            raise ConfigError("remote put: the bytes received do not match their sha256")
        path = received_root() / got / name
        path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
    _say(out, {"stored": str(path), "sha256": got})
    return path


def hand_back(path: str, out: BinaryIO) -> None:
    """A result file the host wrote under its results folder, sent whole, then removed."""
    p = Path(path).resolve()
    root = results_root().resolve()
    if root not in p.parents or not p.is_file():
        raise ConfigError("remote take: only a result under the host's results folder")
    if p.stat().st_size > MAX_TAKE:
        raise ConfigError("remote take: the result is too large")
    with open(p, "rb") as fh:
        while block := fh.read(CHUNK):
            out.write(block)
    out.flush()
    p.unlink()
    for extra in (p.with_name(p.name + "-wal"), p.with_name(p.name + "-shm")):
        extra.unlink(missing_ok=True)  # a session's SQLite side files


def _say(out: Any, message: dict[str, Any]) -> None:
    out.write(json.dumps(message) + "\n")
    out.flush()


def serve_window() -> int:
    """The engine host for a window on another machine: the same loop as a local window's,
    its commands and event batches as wire messages (engine/run/wire.py: data, never code)
    framed on this process's stdin and stdout. Anything a library prints goes to stderr,
    never into the frames. Ends when the window closes its side (or the link drops)."""
    wire_out = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from engine.run.host import host_main
    from engine.run.wire import StreamConnection

    host_main(StreamConnection(0, wire_out))
    return 0


def main_remote(action: str, rest: list[str]) -> int:
    """`opscope remote version | put SHA SIZE NAME | take PATH | host`."""
    if action == "host" and not rest:
        return serve_window()
    if action == "version":
        _say(sys.stdout, hello())
        return 0
    if action == "put" and len(rest) == 3:
        receive(rest[0], int(rest[1]), rest[2], sys.stdin.buffer, sys.stdout)
        return 0
    if action == "take" and len(rest) == 1:
        hand_back(rest[0], sys.stdout.buffer)
        return 0
    raise ConfigError(f"remote: unknown request {action!r}")


def main_cli(argv: list[str]) -> int:
    """`opscope remote ...` as the console script runs it on a host: one line and exit 2
    for a bad request, as every command."""
    from engine.errors import OpScopeError

    try:
        if not argv:
            raise ConfigError("remote: version, put SHA SIZE NAME, take PATH or host")
        return main_remote(argv[0], argv[1:])
    except (OpScopeError, ValueError) as exc:
        text = " ".join(str(exc).split())[:400]
        print(f"opscope: error: {text}", file=sys.stderr)
        return 2
