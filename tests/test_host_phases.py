"""The engine host's state machine (engine/run/host_phases.py), checked on its table: how
each command and each job's report moves the host between idle, loading, timing, paused,
serving, profiling and closing; and the dispatcher that holds a command back while a
profiling pass goes (engine/run/host_dispatch.py)."""

from __future__ import annotations

from typing import Any
from unittest.mock import MagicMock

import pytest

from engine.run import host_commands as cmds
from engine.run.host_builder import Builder
from engine.run.host_dispatch import Dispatcher, signal_of
from engine.run.host_jobs import HostJobs
from engine.run.host_phases import COMMANDS, HostMachine, Mode, Phase, Signal, transition
from engine.run.host_profiler import Profiler
from engine.run.live_job import LiveJob
from engine.run.outbox import Outbox

S = Signal
TIMING = Mode(loaded=True)
PROFILING = Mode(loaded=True, profiling=True)


def phases(mode: Mode, *signals: Signal) -> list[Phase]:
    """The phase after each signal in turn (a signal that must wait leaves it as it is)."""
    seen = []
    for signal in signals:
        mode = transition(mode, signal) or mode
        seen.append(mode.phase)
    return seen


def phase_of(machine: HostMachine) -> Phase:
    return machine.phase


def test_a_first_load_goes_from_idle_through_loading_to_timing() -> None:
    assert Mode().phase is Phase.IDLE
    assert phases(Mode(), S.BUILD, S.BUILT, S.BUILD_ENDED) == [
        Phase.LOADING, Phase.LOADING, Phase.TIMING]  # fmt: skip
    # a bad model: the build ends with nothing built, nothing to time
    assert phases(Mode(), S.BUILD, S.BUILD_ENDED) == [Phase.LOADING, Phase.IDLE]


def test_a_load_while_timing_goes_through_loading_back_to_timing() -> None:
    assert TIMING.phase is Phase.TIMING
    assert phases(TIMING, S.BUILD, S.BUILT, S.BUILD_ENDED) == [
        Phase.LOADING, Phase.LOADING, Phase.TIMING]  # fmt: skip
    # failed or cancelled: the running config is timed again
    assert phases(TIMING, S.BUILD, S.CANCEL, S.BUILD_ENDED) == [
        Phase.LOADING, Phase.LOADING, Phase.TIMING]  # fmt: skip


def test_stop_and_start_pause_and_resume_timing_and_a_build_keeps_it_paused() -> None:
    assert phases(TIMING, S.STOP, S.START) == [Phase.PAUSED, Phase.TIMING]
    assert phases(TIMING, S.STOP, S.BUILD, S.BUILT, S.BUILD_ENDED) == [
        Phase.PAUSED, Phase.LOADING, Phase.LOADING, Phase.PAUSED]  # fmt: skip
    assert phases(TIMING, S.BUILD, S.STOP, S.BUILD_ENDED) == [
        Phase.LOADING, Phase.LOADING, Phase.PAUSED]  # fmt: skip


def test_stop_in_profiling_waits_for_the_pass_to_end() -> None:
    assert phases(TIMING, S.PROFILE_DUE) == [Phase.PROFILING]
    assert transition(PROFILING, S.STOP) is None  # not now
    machine = HostMachine()
    machine.mode = PROFILING
    assert not machine.accepts(S.STOP) and not machine.signal(S.STOP)
    assert machine.mode == PROFILING
    assert machine.signal(S.PROFILED) and phase_of(machine) is Phase.TIMING
    assert machine.signal(S.STOP) and phase_of(machine) is Phase.PAUSED


@pytest.mark.parametrize("signal", sorted(COMMANDS - {Signal.SHUTDOWN}, key=str))
def test_every_command_waits_during_a_profiling_pass(signal: Signal) -> None:
    assert transition(PROFILING, signal) is None


def test_shutdown_does_not_wait_for_a_profiling_pass() -> None:
    assert phases(PROFILING, S.SHUTDOWN) == [Phase.CLOSING]


def test_what_the_jobs_report_is_taken_during_a_pass() -> None:
    for signal in set(Signal) - COMMANDS:
        assert transition(PROFILING, signal) is not None, signal
    assert transition(PROFILING, S.CLOSED) == Mode(loaded=True, profiling=True, closing=True)


def test_a_pass_is_due_only_while_timing() -> None:
    for mode in (Mode(), Mode(loaded=True, timing_on=False), Mode(loaded=True, building=True),
                 Mode(loaded=True, serving=True)):  # fmt: skip
        assert transition(mode, S.PROFILE_DUE) == mode
    assert phases(TIMING, S.PROFILE, S.PROFILE_DUE, S.PROFILED) == [
        Phase.TIMING, Phase.PROFILING, Phase.TIMING]  # fmt: skip


def test_a_job_on_the_loaded_model_holds_it_until_it_ends() -> None:
    assert phases(TIMING, S.SERVE, S.SERVED) == [Phase.SERVING, Phase.TIMING]
    # a build asked for meanwhile waits for the job; a Stop leaves timing off after it
    assert phases(TIMING, S.SERVE, S.BUILD, S.SERVED, S.BUILT, S.BUILD_ENDED) == [
        Phase.SERVING, Phase.SERVING, Phase.LOADING, Phase.LOADING, Phase.TIMING]  # fmt: skip
    assert phases(TIMING, S.SERVE, S.STOP, S.SERVED) == [
        Phase.SERVING, Phase.SERVING, Phase.PAUSED]  # fmt: skip


MODES = [Mode(), TIMING, Mode(loaded=True, timing_on=False), Mode(building=True),
         Mode(loaded=True, serving=True), PROFILING, Mode(closing=True)]  # fmt: skip


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.phase.value)
def test_a_closed_connection_ends_in_closing_from_every_phase(mode: Mode) -> None:
    closed = transition(mode, S.CLOSED)
    assert closed is not None and closed.phase is Phase.CLOSING
    for signal in Signal:  # and nothing moves it out again
        assert transition(closed, signal) == closed


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.phase.value)
def test_the_table_answers_every_signal_in_every_phase(mode: Mode) -> None:
    for signal in Signal:
        transition(mode, signal)  # no signal is left out of the table
    assert phases(mode, S.SHUTDOWN) == [Phase.CLOSING]  # a profiling pass too


def test_each_command_names_its_signal() -> None:
    from engine.run.serving_jobs import CalibrateRequest

    assert signal_of(cmds.Load("m.onnx")) is S.BUILD
    assert signal_of(cmds.SetInputs({}, None, None, "x")) is S.BUILD
    assert signal_of(cmds.Stop()) is S.STOP and signal_of(cmds.Shutdown()) is S.SHUTDOWN
    assert signal_of(cmds.RunJob(1, CalibrateRequest(max_batch=2))) is S.SERVE
    assert signal_of(cmds.RunJob(2, object())) is S.JOB  # in a process of its own
    assert signal_of(cmds.CancelJob(2)) is S.JOB


class NoCommands:
    """The window's end of the pipe, with nothing sent."""

    def send(self, obj: Any) -> None:  # pragma: no cover
        raise AssertionError

    def close(self) -> None:  # pragma: no cover
        pass

    def poll(self, timeout: float = 0.0) -> bool:
        return False

    def recv(self) -> Any:  # pragma: no cover - poll said there was none
        raise AssertionError


def test_commands_during_a_pass_wait_and_then_go_in_order() -> None:
    machine = HostMachine()
    machine.mode = PROFILING
    live = MagicMock(spec=LiveJob)
    live.config = None
    profiler = MagicMock(spec=Profiler)
    host = Dispatcher(
        machine, live, MagicMock(spec=Builder), profiler, MagicMock(spec=HostJobs),
        MagicMock(spec=Outbox),
    )  # fmt: skip
    host.dispatch(cmds.Profile())
    host.dispatch(cmds.Stop())
    assert host.waiting == [cmds.Profile(), cmds.Stop()]
    host.receive(NoCommands(), 0)  # the pass still goes: they wait on
    live.stop.assert_not_called()
    profiler.now.assert_not_called()
    machine.signal(S.PROFILED)
    host.receive(NoCommands(), 0)
    profiler.now.assert_called_once_with()
    live.stop.assert_called_once_with()
    assert host.waiting == [] and phase_of(machine) is Phase.PAUSED


def test_a_shutdown_stops_every_job_and_closes() -> None:
    machine = HostMachine()
    machine.mode = TIMING
    jobs = MagicMock(spec=HostJobs)
    host = Dispatcher(
        machine, MagicMock(spec=LiveJob), MagicMock(spec=Builder), MagicMock(spec=Profiler),
        jobs, MagicMock(spec=Outbox),
    )  # fmt: skip
    host.dispatch(cmds.Shutdown())
    jobs.stop_all.assert_called_once_with()
    assert machine.phase is Phase.CLOSING
