"""The GUI's one handle on the engine host process: commands out, event batches in as Qt
signals. A crash in the host becomes a `host_died` signal, never a dead window.

The host is a child process here, or `opscope remote host` on another machine over the
user's ssh (`target`; app/host/remote_link.py): the same commands and events, as wire
messages (data, never pickles) either way."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import multiprocessing as mp
import threading
from collections.abc import Callable
from multiprocessing.process import BaseProcess
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.host.remote_link import RemoteLink
from engine.api import (
    Channel,
    Event,
    GenerationStarted,
    JobInputs,
    Notice,
    PipeConnection,
    RunConfig,
    RunStarted,
    ServingStarted,
    Target,
    WireError,
    describe_exit,
)
from engine.api import commands as cmds

Sink = Callable[[list[Event]], None]


HOST_END_S = 20.0  # the host's time to end its run and exit once told to (0.3-1 s quiet)
READER_END_S = 10.0  # the reader's, to record what the host sent last
# Clients whose reader outlived their shutdown (a last batch still being recorded on a busy
# machine), or that ran an SSH link, kept to the process's end: dropped by the window, a
# thread of theirs would hold the last reference and delete this QObject there, under the
# GUI thread delivering its signals (deleted off its thread: a crash, app/host/gui_relay.py).
_OUTLIVED: list[EngineClient] = []


class EngineClient(QObject):
    """Spawns `engine.run.host.host_main` and relays its events to the GUI thread."""

    events = Signal(list)  # list[Event], delivered in the GUI thread
    host_died = Signal(str)  # one line: what happened to the host
    host_started = Signal()
    # what the window asked to run (the desk's workload follows them, app/desk/desk.py)
    load_sent = Signal(str, object)  # the model's path, its JobInputs
    inputs_sent = Signal(object)  # the loaded model's JobInputs, changed
    generation_sent = Signal(int, int)  # a generating model's prompt and new tokens

    def __init__(
        self, sink: Sink | None = None, parent: QObject | None = None, nice: int = 0
    ) -> None:
        super().__init__(parent)
        self._sink = sink  # e.g. the session recorder; runs on the reader thread
        self.nice = nice  # the host's CPU priority below ours; applies from the next start
        self._proc: BaseProcess | RemoteLink | None = None
        self._conn: Channel | None = None
        self._reader: threading.Thread | None = None
        self._closing = False
        self._generation = 0
        self.model_path: str | None = None  # the model last sent to load
        self._load_cmd: cmds.Load | None = None  # what a restart sends again
        self.last_config = RunConfig()
        self.target: Target | None = None  # None: a host process on this machine

    @property
    def where(self) -> str:
        """Where the engine runs: "this machine" or the host's label once connected."""
        if self.target is None:
            return "this machine"
        link = self._proc
        if isinstance(link, RemoteLink) and link.ssh.facts:
            return f"{link.ssh.label} (over SSH)"
        if isinstance(link, RemoteLink) and link.failed:
            return f"{self.target} (not connected)"
        return f"{self.target} (connecting over SSH)"

    # lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        if self.target is not None:
            self._start_remote(self.target)
            return
        ctx = mp.get_context("spawn")  # never fork a process that has Qt threads
        parent, child = ctx.Pipe()
        from engine.api import host_main

        # not a daemon: the host runs each job in a process of its own (a daemon may have
        # none); it never outlives the window: it stops when the window's end of the pipe
        # closes, and an exit that skipped shutdown() kills it (before multiprocessing's
        # own exit handler would wait for it)
        proc = ctx.Process(target=host_main, args=(child, 0.1, self.nice), name="opscope-engine")
        proc.start()
        atexit.register(_kill_if_alive, proc)
        child.close()
        conn = PipeConnection(parent)  # data, never pickles, as over SSH (engine/run/wire.py)
        self._proc, self._conn, self._closing = proc, conn, False
        self._generation += 1
        self._reader = threading.Thread(
            target=self._read,
            args=(conn, proc, self._generation),
            name="opscope-engine-reader",
            daemon=True,
        )
        self._reader.start()
        self.host_started.emit()

    def _start_remote(self, target: Target) -> None:
        self._closing = False
        self._generation += 1
        generation = self._generation

        def connected(conn: Channel) -> None:
            self._conn = conn
            self._reader = threading.Thread(
                target=self._read,
                args=(conn, link, generation),
                name="opscope-engine-reader",
                daemon=True,
            )
            self._reader.start()

        def failed(message: str) -> None:
            if not self._closing and generation == self._generation:
                self._tell(self.host_died, message)

        link = RemoteLink(target, self._deliver, connected, failed)
        self._proc, self._conn = link, None
        link.start()
        self.host_started.emit()

    def connect_to(self, target: Target | None) -> None:
        """The engine on `target` from now on (None: this machine): the host restarted
        there with the last model and config (its files sent first)."""
        self.target = target
        self.restart()

    def restart(self) -> None:
        """A fresh host with the last model and config."""
        self.shutdown()
        self.start()
        self.apply(self.last_config)
        if self._load_cmd is not None:
            self._send(self._load_cmd)

    def shutdown(self, timeout: float = HOST_END_S) -> None:
        """The host told to end and waited for: it ends its live run (its summary, RunEnded)
        and exits. A peaks measurement going (the first pass with none cached: a minute or
        more on a busy machine) stops part-way for it (engine/machine/measure_stop.py);
        before, the host finished measuring first, was killed here after HOST_END_S, and
        its run stayed 'cancelled: recording closed before the run ended' in the file
        (tests/test_app_close_order.py). Then the reader, until the host's last events are
        recorded (it ends at the pipe's end)."""
        self._closing = True
        proc = self._proc
        if proc is None:
            return
        if proc.is_alive():
            self._send(cmds.Shutdown())
            proc.join(timeout)
        killed = proc.is_alive()
        if killed:
            proc.kill()
        proc.join(2)  # reaped (an ssh link's pipes closed), even one that died before
        if self._reader is not None:
            self._reader.join(2 if killed else READER_END_S)
        reader_alive = self._reader is not None and self._reader.is_alive()
        # an SSH link's sender thread and its window-side jobs (exports, imports) hold this
        # client too, and are not all waited for: kept as well (one per remote window)
        if reader_alive or isinstance(proc, RemoteLink):
            _OUTLIVED.append(self)
        self._proc = None

    def kill_host(self) -> None:
        """Kill the host outright (a stuck build can always be stopped this way)."""
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.is_alive()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # commands ------------------------------------------------------------------------
    def load(
        self,
        path: str,
        shapes: dict[str, tuple[int, ...]] | None = None,
        inputs: str | None = None,
        config: RunConfig | None = None,
        dims: dict[str, int] | None = None,
        calibration: str | None = None,
        tokenizer: str | None = None,
    ) -> None:
        """Load a model; with `config`, load it with that config (which becomes current);
        `dims` sets symbolic input dims by name, `calibration` static INT8's samples,
        `tokenizer` the tokenizer.json generated texts go through (None: beside it)."""
        if config is not None:
            self.last_config = config
        load = cmds.Load(
            str(path), dict(shapes or {}), inputs, config, dict(dims or {}), calibration,
            tokenizer,
        )  # fmt: skip
        self.model_path = str(path)
        self._load_cmd = dataclasses.replace(load, config=None)  # restart: last_config applies
        self.load_sent.emit(str(path), self.job_inputs())
        self._send(load)

    def job_inputs(self) -> JobInputs:
        """The loaded model's inputs as the window shows them (shapes, dims, data files):
        what every job started from the window runs on and its command line carries."""
        load = self._load_cmd
        if load is None:
            return JobInputs()
        return JobInputs(
            dict(load.shapes), dict(load.dims), load.inputs_npz, load.calibration_npz,
            tokenizer=load.tokenizer,
        )  # fmt: skip

    def set_inputs(
        self,
        dims: dict[str, int],
        inputs: str | None,
        calibration: str | None,
        label: str,
        tokenizer: str | None = None,
    ) -> None:
        """The loaded model's input dims and data files (a new run, marked `label`, when
        they change what runs); `tokenizer`: the texts' tokenizer.json (None: beside it)."""
        if self._load_cmd is not None:
            self._load_cmd = dataclasses.replace(
                self._load_cmd,
                dims=dict(dims),
                inputs_npz=inputs,
                calibration_npz=calibration,
                tokenizer=tokenizer,
            )
            self.inputs_sent.emit(self.job_inputs())
        self._send(cmds.SetInputs(dict(dims), inputs, calibration, label, tokenizer))

    def set_generation(self, prompt_len: int, new_tokens: int) -> None:
        """A generating model's prompt and output lengths (a new run, marked)."""
        self.generation_sent.emit(prompt_len, new_tokens)
        self._send(cmds.GenerationShape(prompt_len, new_tokens))

    def apply(self, config: RunConfig) -> None:
        self.last_config = config
        self._send(cmds.Apply(config))

    def start_timing(self) -> None:
        self._send(cmds.Start())

    def stop_timing(self) -> None:
        self._send(cmds.Stop())

    def profile_now(self) -> None:
        self._send(cmds.Profile())

    def cancel_build(self) -> None:
        if isinstance(self._proc, RemoteLink):  # the model's files may still be on their way
            self._proc.cancel_upload()
        self._send(cmds.Cancel())

    # internals -----------------------------------------------------------------------
    def send(self, cmd: cmds.Command) -> None:
        """Any command to the host (a job's RunJob or CancelJob: app/host/job_runner.py)."""
        self._send(cmd)

    def _send(self, cmd: cmds.Command) -> None:
        if isinstance(self._proc, RemoteLink):  # in order, its files sent first
            self._proc.send(cmd)
            return
        if self._conn is None:
            return
        with contextlib.suppress(BrokenPipeError, OSError):  # the reader reports the death
            self._conn.send(cmd)

    def _read(self, conn: Channel, proc: BaseProcess, generation: int) -> None:
        while True:
            try:
                batch = conn.recv()
            except (EOFError, OSError):
                break
            except WireError as exc:  # not OpScope's messages: refused, the host stopped
                self._closing = True
                self.kill_host()
                self._tell(self.host_died, f"engine host refused: it sent {exc}")
                return
            if isinstance(proc, RemoteLink):  # jobs' sessions merged before they are done
                batch = _with_host_notes(proc.settle(batch), proc.ssh.label)
            if not self._deliver(batch):
                return
        if self._closing:  # `shutdown` reaps it: two threads joining one process race, and
            return  # the loser's waitpid (ECHILD) read as alive: killed=True, a kill sent
        proc.join(2)
        if generation == self._generation:
            why = proc.why() if isinstance(proc, RemoteLink) else describe_exit(proc.exitcode)
            self._tell(self.host_died, why)

    def _deliver(self, batch: list[Event]) -> bool:
        """A batch to the recorder, then the window (False once nobody is left to tell)."""
        if self._sink is not None:
            try:
                self._sink(batch)
            except Exception as exc:  # recording must not stop the live view
                self._tell(self.host_died, f"recording failed: {exc}")
                self._sink = None
        return self._tell(self.events, batch)

    @staticmethod
    def _tell(signal: Any, value: object) -> bool:
        """Emit from the reader thread; False once the client object is gone (the app is
        ending: nobody is left to tell, and a traceback would be the only output)."""
        try:
            signal.emit(value)
        except RuntimeError:  # "Signal source has been deleted"
            return False
        return True


_STARTS = (RunStarted, ServingStarted, GenerationStarted)


def _with_host_notes(batch: list[Event], label: str) -> list[Event]:
    """Each run started on a remote host carries where it ran (recorded with the run)."""
    if not any(isinstance(e, _STARTS) for e in batch):
        return batch
    note = Notice("note", f"ran on {label} over SSH: timed there, the link's latency is not in it")
    out: list[Event] = []
    for e in batch:
        if isinstance(e, _STARTS):
            out.append(note)
        out.append(e)
    return out


def _kill_if_alive(proc: BaseProcess) -> None:
    with contextlib.suppress(Exception):
        if proc.is_alive():
            proc.kill()
            proc.join(2)
