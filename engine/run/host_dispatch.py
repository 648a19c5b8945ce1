"""The engine host's commands in: each one received from the window (engine/run/
host_commands.py) is acted on by the concern it names (the workload and its builds, the
live loop, the profiler, the job table) and moves the host's state by its `Signal`
(engine/run/host_phases.py). A command that comes during a profiling pass waits, in
order, for the pass to end."""

from __future__ import annotations

import contextlib
import importlib
import sys
from pathlib import Path

from engine import backends
from engine.config import RunConfig
from engine.errors import OpScopeError
from engine.events import CommandFailed, Progress
from engine.run import host_commands as cmds
from engine.run.host_builder import Builder
from engine.run.host_jobs import HostJobs
from engine.run.host_phases import HostMachine, Signal
from engine.run.host_profiler import Profiler
from engine.run.host_workload import HostWorkload
from engine.run.jobs import on_loaded_model
from engine.run.live_job import LiveJob
from engine.run.outbox import Outbox
from engine.run.wire import Channel, WireError

BUILDS = (cmds.Load, cmds.Apply, cmds.SetInputs, cmds.GenerationShape)


def signal_of(cmd: object) -> Signal:
    """The signal a command gives the host's state."""
    match cmd:
        case cmds.Load() | cmds.Apply() | cmds.SetInputs() | cmds.GenerationShape():
            return Signal.BUILD
        case cmds.Cancel():
            return Signal.CANCEL
        case cmds.Start():
            return Signal.START
        case cmds.Stop():
            return Signal.STOP
        case cmds.Profile():
            return Signal.PROFILE
        case cmds.RunJob(request=request) if on_loaded_model(request):
            return Signal.SERVE
        case cmds.Shutdown():
            return Signal.SHUTDOWN
    return Signal.JOB  # a job of its own process, its cancel, or a command unknown here


class Dispatcher:
    """Receives the window's commands and acts on them, one at a time."""

    def __init__(
        self,
        machine: HostMachine,
        live: LiveJob,
        builder: Builder,
        profiler: Profiler,
        jobs: HostJobs,
        out: Outbox,
    ) -> None:
        self._machine, self._live, self._builder = machine, live, builder
        self._profiler, self._jobs, self._out = profiler, jobs, out
        self.work = HostWorkload()
        self.waiting: list[object] = []  # commands that came during a profiling pass

    def receive(self, conn: Channel, wait_s: float) -> None:
        """The commands that waited, if they may go now; then the next one from `conn`
        (waiting up to `wait_s` for it)."""
        while self.waiting and self._machine.accepts(signal_of(self.waiting[0])):
            self.dispatch(self.waiting.pop(0))
        if conn.poll(wait_s):
            try:
                cmd = conn.recv()
            except WireError as exc:  # not OpScope's schema: told to the sender, serving on
                self._out.put(CommandFailed("message", str(exc)))
                return
            self.dispatch(cmd)

    def shutdown_asked(self, conn: Channel) -> bool:
        """Asked from inside a long step of the loop (a pass's peaks measurement, a minute
        on a busy machine): the commands that came meanwhile are taken in, to go in order
        once it ends; True once one of them is Shutdown, or the window went away. Else the
        window's wait for the host ran out first and killed it, its run unended."""
        try:
            while conn.poll(0):
                try:
                    self.waiting.append(conn.recv())
                except WireError as exc:  # as `receive` answers it
                    self._out.put(CommandFailed("message", str(exc)))
        except (EOFError, OSError):  # the loop's next receive meets it too, and closes
            return True
        return any(isinstance(cmd, cmds.Shutdown) for cmd in self.waiting)

    def dispatch(self, cmd: object) -> None:
        signal = signal_of(cmd)
        if not self._machine.accepts(signal):
            self.waiting.append(cmd)
            return
        if isinstance(cmd, BUILDS):
            self._build(cmd)
            return
        match cmd:
            case cmds.Shutdown():
                self._jobs.stop_all()  # the window closes: a load run ends now, unserved
            case cmds.RunJob() if signal is Signal.SERVE:
                self._live.lend(cmd.job_id, cmd.request, self._jobs, self.work)
                return  # the live job moves the state when the job has started
            case cmds.RunJob():
                self._jobs.start(cmd.job_id, cmd.request)
            case cmds.CancelJob():
                self._jobs.cancel(cmd.job_id)
            case cmds.Start():
                self._live.start()
            case cmds.Stop():
                self._live.stop()
            case cmds.Profile():
                self._profiler.now()
            case cmds.Cancel():
                self._builder.cancel()
                self._out.put(Progress("variant", 1, 1, "cancelled"))
            case _:
                self._out.put(CommandFailed(type(cmd).__name__, f"unknown command {cmd!r}"))
        self._machine.signal(signal)

    def closed(self) -> None:
        """The window went away (killed): the host's jobs end now."""
        self._machine.signal(Signal.CLOSED)
        self._jobs.stop_all()  # a load run's threads leave the engine before this process ends
        print("opscope engine host: the window went away; stopping", file=sys.stderr)

    def _build(self, cmd: cmds.Load | cmds.Apply | cmds.SetInputs | cmds.GenerationShape) -> None:
        """Prepare the config or inputs the command asks for, beside the running config."""
        work = self.work
        running = self._live.config or work.config
        match cmd:
            case cmds.Load():
                work.load(cmd)
                _import_on_this_thread(work.config)
                self._submit(work.config, f"load {Path(cmd.path).name}", "load")
            case cmds.Apply():
                work.config = cmd.config
                if work.model is None:
                    return
                try:
                    label = backends.describe_change(cmd.config.resolved(), running.resolved())
                except OpScopeError as exc:
                    self._out.put(CommandFailed("apply", str(exc)))
                    return
                _import_on_this_thread(cmd.config)
                self._submit(cmd.config, label, "apply")
            case cmds.GenerationShape():
                if work.model is None:
                    return
                work.generation_shape(cmd, running)
                self._submit(running, f"prompt {cmd.prompt_len}, {cmd.new_tokens} new", "apply")
            case cmds.SetInputs():
                if work.set_inputs(cmd, running):
                    self._submit(running, cmd.label, "apply")

    def _submit(self, config: RunConfig, label: str, command: str) -> None:
        self._builder.submit(self.work.request(config), label, command)
        self._machine.signal(Signal.BUILD)


def _import_on_this_thread(config: RunConfig) -> None:
    """Import the backend's engine library on the host's main thread before a worker does:
    torch.profiler (run on this thread) complains when torch was first imported on another
    one. Once, ~1 s for torch."""
    try:
        module = backends.get(config.engine).capabilities.requires
    except OpScopeError:
        return  # the build reports it in one line
    if module:
        with contextlib.suppress(ImportError):  # the build reports it in one line
            importlib.import_module(module)
