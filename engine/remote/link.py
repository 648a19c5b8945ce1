"""The workstation's side: the handshake, files sent once by hash, a command run on the
host with its output relayed, a result file taken back. Every answer is read as bounded
text and checked; a failure is one line naming the host and the cause."""

from __future__ import annotations

import contextlib
import hashlib
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine import __version__
from engine.cache import cache_root
from engine.errors import ConfigError, OpScopeError
from engine.files import loads_json, write_atomic
from engine.remote.host_side import CHUNK, MAX_RESULT, PROTOCOL
from engine.remote.target import Target

HELLO_TIMEOUT_S = 60
KNOWN_HASHES = 1000  # files remembered as sent, by path, size and mtime
STOP_S = 60  # a host's command stopping after Ctrl+C here: its time to save
MAX_LINE = 64 * 1024
PROGRESS_BYTES = 4 << 20  # progress heard every 4 MiB sent (and at the end)


class RemoteError(OpScopeError):
    """The host could not be reached or answered wrongly: one line."""


def _why(target: Target, code: int, err: str) -> RemoteError:
    last = next((ln.strip() for ln in reversed(err.splitlines()) if ln.strip()), "")
    if code == 255 and "Permission denied" in err:
        return RemoteError(f"{target}: authentication refused ({last}); check the key, agent "
                           "or ~/.ssh/config entry that should reach it")  # fmt: skip
    if code == 255:
        return RemoteError(f"{target}: cannot connect ({last or 'ssh failed'})")
    if code == 127 or "command not found" in err or "No such file" in last:
        return RemoteError(
            f"{target}: no OpScope there (`opscope` is not on its PATH; install "
            f"opscope=={__version__} there, or set OPSCOPE_REMOTE_COMMAND)"
        )
    return RemoteError(f"{target}: {last[:300] or f'exit {code}'}")


def _answer(target: Target, text: str) -> dict[str, Any]:
    line = text.strip().splitlines()[0] if text.strip() else ""
    try:
        data = loads_json(line) if len(line) <= MAX_LINE else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise RemoteError(f"{target}: answered something that is not OpScope's ({line[:80]!r})")
    return data


def hello(target: Target) -> dict[str, Any]:
    """The host's version and machine; refused, in one line, when its OpScope differs."""
    try:
        proc = subprocess.run(target.ssh("remote", "version"), capture_output=True,
                              timeout=HELLO_TIMEOUT_S, stdin=subprocess.DEVNULL)  # fmt: skip
    except FileNotFoundError:
        raise RemoteError("ssh (OpenSSH's client) is not installed on this machine") from None
    except subprocess.TimeoutExpired:
        raise RemoteError(f"{target}: no answer in {HELLO_TIMEOUT_S} s") from None
    err = proc.stderr.decode(errors="replace")
    if proc.returncode != 0:
        raise _why(target, proc.returncode, err)
    info = _answer(target, proc.stdout.decode(errors="replace"))
    theirs, protocol = info.get("opscope"), info.get("protocol")
    if (
        theirs == __version__
        and protocol == PROTOCOL
        and not (
            isinstance(info.get("results"), str)
            and isinstance(info.get("gpus"), int)
            and isinstance(info.get("hostname"), str)
            and isinstance(info.get("cpu"), str)
        )
    ):
        raise RemoteError(f"{target}: its handshake lacks the results folder or its machine")
    if theirs != __version__ or protocol != PROTOCOL:
        raise RemoteError(
            f"{target} runs OpScope {str(theirs)[:40]} (protocol {str(protocol)[:10]}), this "
            f"machine {__version__} (protocol {PROTOCOL}): install the same version there "
            f"(pip install opscope=={__version__})"
        )
    return info


def _known_hashes() -> Path:
    return cache_root() / "remote" / "sent-hashes.json"


def known_sha256(path: Path) -> str | None:
    """The sha256 of a file sent before, while its size and mtime are unchanged."""
    st = path.stat()
    try:
        table = json.loads(_known_hashes().read_text())
        value = table.get(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and len(value) == 64 else None


def _remember(path: Path, sha: str) -> None:
    st = path.stat()
    store = _known_hashes()
    try:
        table = json.loads(store.read_text())
        table = table if isinstance(table, dict) else {}
    except (OSError, ValueError):
        table = {}
    table[f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}"] = sha
    kept = dict(list(table.items())[-KNOWN_HASHES:])
    store.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(store, lambda fh: fh.write(json.dumps(kept)))


def send_file(
    target: Target, path: Path, progress: Callable[[int, int], None] | None = None
) -> tuple[str, bool]:
    """`path` into the host's cache by its content hash: (its path there, whether its
    bytes were sent; False when the host had it already). A file sent before from here
    is asked for by its hash first; a new one is hashed while it is sent (one read), and
    the host's hash of what arrived must equal it. A file that changes while it is sent
    is refused."""
    before = path.stat()
    size = before.st_size
    known = known_sha256(path)
    proc = subprocess.Popen(target.ssh("remote", "put", known or "-", str(size), path.name),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        first = _answer(target, proc.stdout.readline(MAX_LINE).decode(errors="replace") or " ")
    except RemoteError:
        proc.kill()
        _, err = proc.communicate()
        if proc.returncode not in (0, None, -9):
            raise _why(target, proc.returncode, err.decode(errors="replace")) from None
        raise
    if "have" in first:
        proc.communicate()
        return str(first["have"]), False
    sent = told = 0
    digest = hashlib.sha256()
    buf = memoryview(bytearray(CHUNK))  # one buffer, used again (host_side.CHUNK)
    try:
        with open(path, "rb", buffering=0) as fh:
            while sent < size and (n := fh.readinto(buf[: min(CHUNK, size - sent)])):
                proc.stdin.write(buf[:n])
                digest.update(buf[:n])
                sent += n
                if progress is not None and (sent - told >= PROGRESS_BYTES or sent == size):
                    told = sent
                    progress(sent, size)
    except (BrokenPipeError, KeyboardInterrupt):
        proc.kill()
        proc.communicate()
        raise
    out, err = proc.communicate()  # closes stdin: the end of the file
    if proc.returncode != 0:
        raise _why(target, proc.returncode, err.decode(errors="replace"))
    answer = _answer(target, out.decode(errors="replace"))
    sha, stored = answer.get("sha256"), answer.get("stored")
    if sha != digest.hexdigest() or not isinstance(stored, str):
        raise RemoteError(f"{target}: {path.name} arrived changed (its sha256 differs)")
    after = path.stat()
    if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
        raise RemoteError(f"{path}: changed while it was sent to {target}; send it again")
    _remember(path, sha)
    return stored, True


def send_folder(
    target: Target,
    root: Path,
    files: list[Path] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[str, bool]:
    """`files` (default: every file under `root`), each sent once by hash (send_file),
    then assembled on the host as a folder named as `root`, at their paths relative to it:
    the folder's path there, and whether any file's bytes were sent. `progress` hears
    (file name, bytes sent, bytes in all)."""
    chosen = files if files is not None else sorted(p for p in root.rglob("*") if p.is_file())
    entries = []
    sent_any = False
    for path in chosen:
        tell = None if progress is None else (lambda d, t, n=path.name: progress(n, d, t))
        _, sent = send_file(target, path, tell)
        sent_any |= sent
        sha = known_sha256(path)
        assert sha is not None  # remembered by send_file, sent now or before
        rel = path.relative_to(root).as_posix()
        entries.append({"path": rel, "sha256": sha, "size": path.stat().st_size})
    manifest = json.dumps({"files": entries}).encode()
    proc = subprocess.run(target.ssh("remote", "folder", root.name), input=manifest,
                          capture_output=True, timeout=HELLO_TIMEOUT_S)  # fmt: skip
    if proc.returncode != 0:
        raise _why(target, proc.returncode, proc.stderr.decode(errors="replace"))
    answer = _answer(target, proc.stdout.decode(errors="replace"))
    if not isinstance(answer.get("folder"), str):
        raise RemoteError(f"{target}: answered no folder for {root.name}")
    return str(answer["folder"]), sent_any


def run_relayed(target: Target, args: list[str]) -> int:
    """`opscope ARGS` on the host, its stdout and stderr relayed here as they come; its
    exit code (255: the connection failed or dropped, said in one line)."""
    proc = subprocess.Popen(target.ssh(*args, stop_on_eof=True), stdin=subprocess.PIPE,
                            stdout=sys.stdout.buffer, stderr=subprocess.PIPE)  # fmt: skip
    assert proc.stderr is not None and proc.stdin is not None
    tail: list[str] = []

    def relay() -> None:
        nonlocal tail
        for raw in iter(proc.stderr.readline, b""):  # type: ignore[union-attr]
            line = raw.decode(errors="replace")
            tail = [*tail, line][-5:]
            sys.stderr.write(line)
            sys.stderr.flush()

    try:
        relay()
        code = proc.wait()
    except KeyboardInterrupt:
        # its stdin closed, the host's command stops as Ctrl+C stops it (keeping what it
        # measured) and says so; ssh is ended only if it does not within STOP_S
        with contextlib.suppress(OSError):
            proc.stdin.close()
        try:
            with contextlib.suppress(KeyboardInterrupt):
                relay()
            proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait(10)
        raise
    if code == 255:
        raise _why(target, code, "".join(tail))
    return code


def take_file(target: Target, path: str, dest: Path) -> None:
    """A file the host wrote at `path` (a session), streamed into `dest`, removed there."""
    with open(dest, "wb") as fh:
        proc = subprocess.run(target.ssh("remote", "take", path), stdout=fh,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)  # fmt: skip
    if proc.returncode != 0:
        raise _why(target, proc.returncode, proc.stderr.decode(errors="replace"))


def take_result(target: Target, path: str) -> dict[str, Any]:
    """The JSON result the host wrote at `path` (removed there)."""
    proc = subprocess.run(target.ssh("remote", "take", path), capture_output=True,
                          timeout=HELLO_TIMEOUT_S, stdin=subprocess.DEVNULL)  # fmt: skip
    if proc.returncode != 0:
        raise _why(target, proc.returncode, proc.stderr.decode(errors="replace"))
    if len(proc.stdout) > MAX_RESULT:
        raise RemoteError(f"{target}: its result is too large")
    try:
        data = loads_json(proc.stdout)
    except ValueError:
        raise RemoteError(f"{target}: its result is not JSON") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{target}: its result is not a JSON object")
    return data
