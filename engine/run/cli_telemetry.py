"""Machine telemetry alongside one CLI run: CPU (and GPU, when NVML sees one) sampled at
~10 Hz on a thread into a queue, drained between the run's events so the single-threaded
recorder receives them in order; GPU throttling during the run becomes a warning Notice."""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterable, Iterator

from engine.events import Event, RunEnded, Telemetry
from engine.machine.cpu_telemetry import DEFAULT_INTERVAL_S, CpuSampler, TelemetryThread
from engine.machine.gpu_telemetry import ThrottleWatch, gpu_sampler_or_none


class RunTelemetry:
    """`interleave(events)` yields the run's events with Telemetry events between them."""

    def __init__(
        self,
        interval_s: float = DEFAULT_INTERVAL_S,
        samplers: list[Callable[[], dict[str, float]]] | None = None,
    ) -> None:
        self._gpu = None
        if samplers is None:
            samplers = [CpuSampler().sample]
            self._gpu = gpu_sampler_or_none()
            if self._gpu is not None:
                samplers.append(self._gpu.sample)
        self._queue: queue.SimpleQueue[Telemetry] = queue.SimpleQueue()
        self._thread = TelemetryThread(self._queue.put, samplers, interval_s)
        self.watch = ThrottleWatch()

    def interleave(self, events: Iterable[Event]) -> Iterator[Event]:
        """The run's events, telemetry drained before each; sampling stops at RunEnded."""
        self._thread.start()
        try:
            for ev in events:
                if isinstance(ev, RunEnded):
                    self._stop()
                    yield from self._drain()
                    notice = self.watch.notice()
                    if notice is not None:
                        yield notice
                else:
                    yield from self._drain()
                yield ev
        finally:
            self._stop()

    def _drain(self) -> Iterator[Telemetry]:
        while True:
            try:
                sample = self._queue.get_nowait()
            except queue.Empty:
                return
            self.watch.feed(sample.values)
            yield sample

    def _stop(self) -> None:
        self._thread.stop()
        if self._gpu is not None:
            self._gpu.close()
            self._gpu = None
