"""The window's engine host on another machine: `opscope remote host` over the user's own
ssh, speaking the wire messages a local host speaks (engine/run/wire.py), and the files the
window's commands name sent once by content hash into the host's cache first.

Nothing listens on the server: the host is a child of the user's ssh session and ends with
it. Timing happens on the host; the link's latency never enters a measurement."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.errors import ConfigError, OpScopeError
from engine.remote.link import RemoteError, hello, send_file, send_folder
from engine.remote.target import Target
from engine.run import host_commands as cmds
from engine.run.wire import StreamConnection
from engine.serve.traffic.schedule import with_trace_file

# Jobs on the window's own files (an export reads the session here, an import writes a
# model folder here): they run on this machine even when the engine is on a host.
WINDOW_SIDE_JOBS = frozenset({"ExportRequest", "ImportRequest"})
# Jobs that record into a session file as they go (each trial, each point: `session`): on a
# host they record into one of the host's own, brought back and merged here when they end.
TERMINAL = ("done", "failed", "cancelled")
Progress = Callable[[str, int, int], None]  # (file name, bytes sent, bytes in all)


class SshHost:
    """`opscope remote host` on `target`, as a process the window holds (the shape of a
    multiprocessing Process: is_alive, kill, join, exitcode, pid)."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.facts: dict[str, Any] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._err: collections.deque[str] = collections.deque(maxlen=5)

    def start(self) -> StreamConnection:
        """The handshake (refused in one line when the host's OpScope differs), then the
        host started; its channel. RemoteError when it cannot be reached."""
        self.facts = hello(self.target)
        proc = subprocess.Popen(self.target.ssh("remote", "host"), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self._proc = proc
        threading.Thread(target=self._drain_stderr, daemon=True, name="opscope-ssh-err").start()
        return StreamConnection(proc.stdout.fileno(), proc.stdin.fileno())

    def _drain_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        for raw in iter(self._proc.stderr.readline, b""):
            line = raw.decode(errors="replace").strip()
            if line:
                self._err.append(line)

    @property
    def label(self) -> str:
        """ "gpu-box: 1 GPU, Intel Xeon ..." (its CPU alone where it has no GPU)."""
        gpus = self.facts.get("gpus") or 0
        cpu = self.facts.get("cpu") or "?"
        what = f"{gpus} GPU{'s' if gpus > 1 else ''}, {cpu}" if gpus else cpu
        return f"{self.facts.get('hostname') or self.target.host}: {what}"

    def is_alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()

    def join(self, timeout: float | None = None) -> None:
        """Wait for ssh to end; once it has, its pipes are closed."""
        if self._proc is None:
            return
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return
        for pipe in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    def close_input(self) -> None:
        """The window's side closed: the host ends its run (keeping it) and exits."""
        if self._proc is not None and self._proc.stdin is not None:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()

    @property
    def exitcode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def why(self) -> str:
        """One line: what ended the host (the link dropped, the host died)."""
        code = self.exitcode
        last = self._err[-1] if self._err else ""
        if code == 255:
            return f"{self.target}: the connection dropped ({last or 'ssh exited 255'})"
        return f"{self.target}: the engine host ended (exit {code}{'; ' + last if last else ''})"


class FileSender:
    """Local files named by the window's commands, sent once into the host's cache: the
    command with the host's paths in their place. A folder is refused in one line."""

    def __init__(
        self, target: Target, progress: Progress | None = None, results: str | None = None
    ) -> None:
        self.target = target
        self.progress = progress
        self.results = results  # the host's results folder (its handshake says)
        self._sent: dict[tuple[str, int, int], str] = {}
        self.cancelled = threading.Event()
        self.sessions: dict[int, tuple[str, str]] = {}  # job id -> (host's session, ours)
        self.local_of: dict[str, str] = {}  # a host's path -> the path it was sent from
        self.with_files: set[str] = set()  # host paths sent as several files (a folder, data)

    def path(self, local: str) -> str:
        """The host's copy of `local` (see `send`)."""
        return self.send(local)[0]

    def send(self, local: str) -> tuple[str, bool]:
        """The host's copy of `local`: a file, a folder (a genai model, a folder of inputs:
        its files, then the folder assembled there), or an ONNX model whose weights are in
        external data files (the model and those files, as a folder); and whether any byte
        was sent (False: the host had every file already)."""
        p = Path(local)
        if not p.exists():
            raise ConfigError(f"{local}: no such file or folder")
        st = p.stat()
        key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
        if key in self._sent:
            return self._sent[key], False
        if p.is_dir():
            files = sorted(f for f in p.rglob("*") if f.is_file())
            if not files:
                raise ConfigError(f"{local}: an empty folder")
            remote, sent = send_folder(self.target, p, files, self._tell)
            self.with_files.add(remote)
        elif externals := external_data_files(p):
            folder, sent = send_folder(self.target, p.parent, [p, *externals], self._tell)
            remote = f"{folder}/{p.name}"
            self.with_files.add(remote)
        else:
            remote, sent = send_file(self.target, p, lambda d, t: self._tell(p.name, d, t))
        self._sent[key] = remote
        self.local_of[remote] = local
        return remote, sent

    def spec(self, field: str, value: str) -> str:
        """A field that names a local file, as the host names its copy: a path, or for a
        `traffic` field a `trace:FILE[@options]` spec with its file sent (any other
        traffic spec as it is)."""
        if field == "traffic":
            return with_trace_file(value, self.path)
        return self.path(value)

    def _tell(self, name: str, done: int, total: int) -> None:
        if self.cancelled.is_set():
            raise KeyboardInterrupt
        if self.progress is not None:
            self.progress(name, done, total)

    def command(self, cmd: Any) -> Any:
        """`cmd` with every local file it names replaced by the host's copy."""
        if isinstance(cmd, cmds.Load):
            return dataclasses.replace(
                cmd,
                path=self.path(cmd.path),
                inputs_npz=self._maybe(cmd.inputs_npz),
                calibration_npz=self._maybe(cmd.calibration_npz),
            )
        if isinstance(cmd, cmds.SetInputs):
            return dataclasses.replace(
                cmd,
                inputs_npz=self._maybe(cmd.inputs_npz),
                calibration_npz=self._maybe(cmd.calibration_npz),
            )
        if isinstance(cmd, cmds.RunJob):
            local_session = getattr(cmd.request, "session", None)
            request = self._files_in(
                dataclasses.replace(cmd.request, session=None) if local_session else cmd.request
            )
            if local_session:  # recorded there as it goes, merged here when it ends
                if self.results is None:
                    raise ConfigError(f"{self.target}: its handshake named no results folder")
                there = f"{self.results}/{uuid.uuid4().hex}.opscope"
                request = dataclasses.replace(request, session=there)
                self.sessions[cmd.job_id] = (there, str(local_session))
            return dataclasses.replace(cmd, request=request)
        return cmd

    def bring_back(self, job_id: int) -> str | None:
        """A job's session from the host merged into ours (its runs renumbered, the file
        there removed); None, or one line saying why nothing came back."""
        there, ours = self.sessions.pop(job_id)
        from engine.remote.link import take_file
        from engine.session.merge import copy_runs
        from engine.session.store import SessionStore

        with tempfile.TemporaryDirectory(prefix=".opscope-host-") as tmp:
            copy = Path(tmp) / "host.opscope"
            try:
                take_file(self.target, there, copy)
            except OpScopeError as exc:
                if "only a result under" in str(exc):  # the job recorded nothing
                    return None
                return f"nothing recorded came back from {self.target} ({exc})"
            try:
                with SessionStore.create_or_open(ours) as store:
                    copy_runs(store, copy, self.local_of)
            except OpScopeError as exc:
                return f"the runs from {self.target} could not be merged ({exc})"
        return None

    def _maybe(self, local: str | None) -> str | None:
        return None if local is None else self.path(local)

    def _files_in(self, value: Any) -> Any:
        """A request with each field its class names in `local_files` (a path, or a trace
        spec) sent and replaced by the host's copy; nested values (a request's workload and
        its inputs, a sweep's bench, a study's plan) likewise."""
        if not dataclasses.is_dataclass(value) or isinstance(value, type):
            return value
        named = getattr(type(value), "local_files", ())
        changes = {}
        for f in dataclasses.fields(value):
            if not f.init:
                continue
            old = getattr(value, f.name)
            if f.name in named:
                new = self.spec(f.name, old) if isinstance(old, str) and old else old
            else:
                new = self._files_in(old)
            if new is not old:
                changes[f.name] = new
        return dataclasses.replace(value, **changes) if changes else value


def external_data_files(model: Path) -> list[Path]:
    """The files an ONNX model's weights live in besides the model (none: []); one that is
    missing or outside the model's folder is a ConfigError naming it."""
    if model.suffix.lower() != ".onnx" or not model.is_file():
        return []
    st = model.stat()
    found = []
    for name in _external_names(str(model.resolve()), st.st_size, st.st_mtime_ns):
        f = (model.parent / name).resolve()
        if model.parent.resolve() not in f.parents or not f.is_file():
            raise ConfigError(f"{model}: its external data file {name!r} is missing")
        found.append(model.parent / name)
    return found


@functools.lru_cache(maxsize=16)
def _external_names(path: str, size: int, mtime_ns: int) -> tuple[str, ...]:
    """The external data files a model's initializers name, read once per version of the
    file (the CLI checks them before it connects, then sends them)."""
    import onnx

    try:
        m = onnx.load(path, load_external_data=False)
    except Exception:
        return ()  # the host says what is wrong with it, as locally
    names: set[str] = set()
    for t in m.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            names.update(e.value for e in t.external_data if e.key == "location")
    return tuple(sorted(names))


def finished_jobs(batch: list[Any]) -> list[int]:
    """The ids of the jobs that end in `batch`."""
    from engine.events import JobUpdate

    return [e.job_id for e in batch if isinstance(e, JobUpdate) and e.kind in TERMINAL]


def window_side(cmd: Any) -> bool:
    """Whether `cmd` is a job that runs where the window is (WINDOW_SIDE_JOBS)."""
    return isinstance(cmd, cmds.RunJob) and type(cmd.request).__name__ in WINDOW_SIDE_JOBS


__all__ = ["FileSender", "RemoteError", "SshHost", "finished_jobs", "window_side"]
