"""What a host answers over SSH (`opscope remote ...`), data only: its version and machine
as one JSON line; a file received by content hash into its cache (checked, written whole or
not at all); a result file handed back once and removed. Every name the other side sends
is checked: a hash of 64 hex digits, a plain file name, a result under the host's own
results folder."""

from __future__ import annotations

import hashlib
import io
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
# bytes per read and write of a file sent, into one buffer used again: coreutils' 128 KiB.
# A buffer that fits in a core's L2 cache beside the kernel's copy of it: on a 2-vCPU EPYC
# (1 MiB L2) 1 MiB chunks cost 0.67 s of system time per 256 MB where 128 KiB cost 0.09.
CHUNK = 128 << 10
_SHA = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^[A-Za-z0-9._+-]{1,200}$")


def received_root() -> Path:
    return cache_root() / "remote" / "files"


def results_root() -> Path:
    return cache_root() / "remote" / "results"


def hello() -> dict[str, Any]:
    """The handshake's answer: version, protocol, this machine, where results go."""
    from engine.hostinfo import cpu_model, gpu_count, host_name

    results_root().mkdir(parents=True, exist_ok=True)  # results and sessions land there
    return {
        "opscope": __version__,
        "protocol": PROTOCOL,
        "hostname": host_name() or platform.node(),
        "cpu": cpu_model(),
        "gpus": gpu_count(),
        "results": str(results_root()),
    }


def receive(sha: str, size: int, name: str, src: io.BufferedIOBase, out: Any) -> Path:
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
    sweep_stale_parts(incoming)
    part = incoming / f"{name}.{os.getpid()}.part"
    digest = hashlib.sha256()
    left = size
    buf = memoryview(bytearray(CHUNK))
    try:
        with open(part, "wb", buffering=0) as fh:
            while left:
                n = src.readinto(buf[: min(CHUNK, left)])
                if not n:
                    raise ConfigError(f"remote put: the file ended {left} bytes early")
                digest.update(buf[:n])
                fh.write(buf[:n])
                left -= n
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


def sweep_stale_parts(incoming: Path) -> int:
    """Remove the half-received files of senders no longer running: a receiver removes its
    own when its sender stops (the stream ends early), but one killed outright (SIGKILL, a
    reboot) cannot. A part's name carries its receiver's pid; returns how many went."""
    import psutil

    gone = 0
    for part in incoming.glob("*.*.part"):
        pid = part.name.rsplit(".", 2)[-2]
        if not pid.isdigit() or int(pid) == os.getpid() or psutil.pid_exists(int(pid)):
            continue
        try:
            part.unlink()
            gone += 1
        except OSError:
            pass  # removed meanwhile, or not ours to remove
    return gone


MAX_FOLDER_FILES = 10_000


def assemble(name: str, manifest: Any, out: Any) -> Path:
    """A folder named `name` made of files received before (`remote put`), each at its
    relative path: `manifest` {"files": [{"path": "a/b.onnx", "sha256": hex, "size": n}]}.
    Kept under the manifest's own hash (the same folder sent again is found, not rebuilt),
    built aside and renamed into place whole; `{"folder": path}`."""
    if not _NAME.match(name) or name.startswith("."):
        raise ConfigError("remote folder: a plain folder name is needed")
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list) or not 0 < len(files) <= MAX_FOLDER_FILES:
        raise ConfigError(f"remote folder: 1 to {MAX_FOLDER_FILES} files are needed")
    plan: list[tuple[Path, Path]] = []
    for f in files:
        rel, sha, size = (f.get(k) for k in ("path", "sha256", "size")) if isinstance(
            f, dict) else (None, None, None)  # fmt: skip
        parts = rel.split("/") if isinstance(rel, str) else []
        if not parts or not all(_NAME.match(p) and p not in (".", "..") for p in parts):
            raise ConfigError(f"remote folder: {str(rel)[:80]!r} is not a plain relative path")
        if not (isinstance(sha, str) and _SHA.match(sha) and isinstance(size, int)):
            raise ConfigError("remote folder: each file needs its sha256 and size")
        stored = [p for p in (received_root() / sha).glob("*") if p.is_file()]
        if not stored or stored[0].stat().st_size != size:
            raise ConfigError(f"remote folder: {rel} was not received")
        plan.append((stored[0], Path(*parts)))
    key = hashlib.sha256(json.dumps(sorted(map(str, files)), sort_keys=True).encode())
    dest = received_root() / "folders" / key.hexdigest() / name
    if not dest.is_dir():
        building = dest.parent / f".{name}.{os.getpid()}.part"
        import shutil

        for src, rel_path in plan:
            target = building / rel_path
            target.parent.mkdir(parents=True, exist_ok=True)
            # a copy, not a hard link: ONNX refuses external data with several links (a
            # "hardlink attack"); the kernel copies (copy_file_range), reflinks where it can
            shutil.copyfile(src, target)
        try:
            os.replace(building, dest)
        except OSError:  # built meanwhile by another sender: theirs is the same
            shutil.rmtree(building, ignore_errors=True)
            if not dest.is_dir():
                raise
    _say(out, {"folder": str(dest)})
    return dest


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
    """`opscope remote version | put SHA SIZE NAME | folder NAME | take PATH | host`."""
    if action == "host" and not rest:
        return serve_window()
    if action == "version":
        _say(sys.stdout, hello())
        return 0
    if action == "put" and len(rest) == 3:
        stdin = sys.stdin.buffer
        assert isinstance(stdin, io.BufferedIOBase)  # readinto: one buffer, used again
        receive(rest[0], int(rest[1]), rest[2], stdin, sys.stdout)
        return 0
    if action == "folder" and len(rest) == 1:
        raw = sys.stdin.read(MAX_RESULT)
        try:
            manifest = json.loads(raw)
        except ValueError:
            raise ConfigError("remote folder: the manifest is not JSON") from None
        except RecursionError:
            raise ConfigError("remote folder: the manifest is nested too deeply") from None
        assemble(rest[0], manifest, sys.stdout)
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
            raise ConfigError("remote: version, put SHA SIZE NAME, folder NAME, take PATH or host")
        if sys.stdout is None:  # a closed stdout (found by bench/probe_fuzz.py: a traceback)
            raise ConfigError("remote: stdout is closed: the answer has nowhere to go")
        return main_remote(argv[0], argv[1:])
    except (OpScopeError, ValueError) as exc:
        text = " ".join(str(exc).split())[:400]
        print(f"opscope: error: {text}", file=sys.stderr)
        return 2
    except OSError as exc:  # the answer's stdout on a full disk, or gone
        _drop_stdout()
        print(f"opscope: error: remote: {exc.strerror or exc}", file=sys.stderr)
        return 2


def _drop_stdout() -> None:
    """What stdout could not take is dropped: the interpreter's flush at exit would fail
    again, with a traceback."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
        sys.stdout.flush()
    except (OSError, ValueError, AttributeError):
        pass
