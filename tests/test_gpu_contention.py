"""A GPU run's contention with a fake pynvml: other processes' SM utilisation and the
clock slowdowns NVML reports make it busy; our own process's use and idle clocks do not."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

from engine.machine.gpu_contention import NvmlLoad, window_for
from engine.measure.contention import Contention
from tests.test_system import fake_nvml


class _NotFound(Exception):
    pass


def _nvml(samples: list[tuple[int, int, int]] | None, reasons: int = 0x1) -> Any:
    """fake_nvml with per-process samples (pid, timestamp, smUtil); None: NVML has none."""
    nvml = fake_nvml()

    def utilisation(handle: Any, since: int) -> list[Any]:
        if samples is None:
            raise _NotFound("Not Found")
        return [SimpleNamespace(pid=p, timeStamp=t, smUtil=u) for p, t, u in samples]

    nvml.NVMLError_NotFound = _NotFound
    nvml.nvmlDeviceGetProcessUtilization = utilisation
    nvml.nvmlDeviceGetCurrentClocksEventReasons = lambda h: reasons
    return nvml


def test_other_processes_on_the_gpu_make_a_run_busy() -> None:
    me = os.getpid()
    load = NvmlLoad(0, _nvml([(me, 1, 90), (4242, 1, 40), (me, 2, 95), (4242, 2, 20)]))
    others, slow = load.since(load.mark())
    assert others == 30.0 and slow is None  # ours is not counted; idle is no slowdown
    c = Contention(1.0, 16, 0.0, 0.0, 1.0, gpu_others=others, gpu_throttle=slow)
    assert c.verdict == "busy" and "kept 30% of the GPU busy" in c.line()
    back = Contention.from_json(c.to_json())
    assert back is not None and back.gpu_others == 30.0


def test_throttling_and_no_samples() -> None:
    load = NvmlLoad(0, _nvml(None, reasons=0x4 | 0x40))
    others, slow = load.since(load.mark())
    assert others == 0.0  # nobody used the GPU
    assert slow == "software power cap, hardware thermal slowdown"
    c = Contention(1.0, 16, 0.0, 0.0, 1.0, gpu_others=others, gpu_throttle=slow)
    assert c.busy and "clocks were held down (software power cap" in c.line()


def test_a_gpu_window_reads_the_gpu_and_a_cpu_one_does_not() -> None:
    gpu = window_for("CUDAExecutionProvider", nvml=_nvml([(4242, 1, 50)]))
    c = gpu.done()
    assert c is not None and c.gpu_others == 50.0
    cpu = window_for("CPUExecutionProvider", nvml=_nvml([(4242, 1, 50)]))
    c = cpu.done()
    assert c is not None and c.gpu_others is None
