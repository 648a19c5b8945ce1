"""The engine host's side channels, each on a thread of its own: the machine's telemetry
(CPU, and NVML when a GPU is present), whose GPU throttling a live run flags, and the
heartbeat the window's hang alarm listens for (engine/run/heartbeat.py)."""

from __future__ import annotations

from collections.abc import Callable

from engine.events import Telemetry
from engine.machine.cpu_telemetry import CpuSampler, TelemetryThread
from engine.machine.gpu_telemetry import ThrottleWatch
from engine.run.heartbeat import HeartbeatThread
from engine.run.outbox import Outbox

Sampler = Callable[[], dict[str, float]]


class HostTelemetry:
    """Telemetry from `samplers` (default: CPU, and NVML when a GPU is present) every
    `interval_s`, watched for throttling (`throttle`), and a heartbeat every second."""

    def __init__(self, out: Outbox, samplers: list[Sampler] | None, interval_s: float) -> None:
        self._out = out
        self.throttle = ThrottleWatch()
        self._heartbeat = HeartbeatThread(out.beat)
        self._samplers = samplers
        self._interval_s = interval_s
        self._thread: TelemetryThread | None = None

    def start_heartbeat(self) -> None:
        """Beating from now on, even while the main loop is inside a long native call."""
        self._heartbeat.start()

    def start(self) -> None:
        samplers = self._samplers
        if samplers is None:
            samplers = [CpuSampler().sample, *_gpu_samplers()]
        self._thread = TelemetryThread(self._emit, samplers, self._interval_s)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._thread.stop()
        self._heartbeat.stop()

    def _emit(self, ev: Telemetry) -> None:
        self.throttle.feed(ev.values)
        self._out.put(ev)


def _gpu_samplers() -> list[Sampler]:
    """The NVML sampler when a GPU is present (none otherwise)."""
    from engine.machine.gpu_telemetry import gpu_sampler_or_none

    gpu = gpu_sampler_or_none()
    return [gpu.sample] if gpu is not None else []
