"""Cheap machine telemetry where the engine runs: CPU utilisation (total and per core),
process memory and CPU frequency via psutil. GPU metrics join these in the same samples."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from engine.events import Telemetry

DEFAULT_INTERVAL_S = 0.1


class CpuSampler:
    """Samples psutil counters; the first call primes the CPU-percent counters."""

    def __init__(self, pid: int | None = None) -> None:
        import psutil

        self._psutil = psutil
        self._proc = psutil.Process(pid)
        psutil.cpu_percent(percpu=True)
        self._proc.cpu_percent()

    def sample(self) -> dict[str, float]:
        ps = self._psutil
        per_core = ps.cpu_percent(percpu=True)
        values: dict[str, float] = {
            "cpu_percent": float(sum(per_core) / max(len(per_core), 1)),
            "process_cpu_percent": float(self._proc.cpu_percent()),
            "rss_mb": self._proc.memory_info().rss / 2**20,
        }
        for i, pct in enumerate(per_core):
            values[f"cpu{i}_percent"] = float(pct)
        freq = ps.cpu_freq() if hasattr(ps, "cpu_freq") else None
        if freq is not None and freq.current:
            values["cpu_freq_mhz"] = float(freq.current)
        mem = ps.virtual_memory()
        values["mem_used_percent"] = float(mem.percent)
        return values


class TelemetryThread:
    """Calls `emit(Telemetry(...))` every `interval_s` from a daemon thread until stopped."""

    def __init__(
        self,
        emit: Callable[[Telemetry], None],
        samplers: list[Callable[[], dict[str, float]]],
        interval_s: float = DEFAULT_INTERVAL_S,
    ) -> None:
        self._emit = emit
        self._samplers = samplers
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="opscope-telemetry", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)

    def _loop(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            values: dict[str, float] = {}
            for sampler in self._samplers:
                try:
                    values.update(sampler())
                except Exception:  # a flaky counter must never stop the engine
                    continue
            self._emit(Telemetry(time.perf_counter_ns(), values))
            next_t += self._interval
            self._stop.wait(max(0.0, next_t - time.monotonic()))
