"""The memory probe's GPU reading (engine/backends/ort/device_memory.py) against a
stand-in NVML: this process's use where NVML lists it, the device's used memory where it
cannot (a container), nothing on CPU runs. A real GPU is read by bench/gpu_check.py."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import pytest

import engine.backends.ort.device_memory as dm


class FakeNvml:
    def __init__(self, mine: int | None, used: int) -> None:
        self.mine, self.used, self.shut = mine, used, False

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return "gpu0"

    def nvmlDeviceGetComputeRunningProcesses(self, h: str) -> list[Any]:
        procs = [SimpleNamespace(pid=1, usedGpuMemory=5)]
        if self.mine is not None:
            procs.append(SimpleNamespace(pid=os.getpid(), usedGpuMemory=self.mine))
        return procs

    def nvmlDeviceGetMemoryInfo(self, h: str) -> Any:
        return SimpleNamespace(used=self.used)


@pytest.mark.parametrize(("mine", "scope", "value"), [(300, "process", 300), (None, "device", 900)])
def test_the_gpu_reading_is_this_process_where_nvml_can_tell(
    monkeypatch: pytest.MonkeyPatch, mine: int | None, scope: str, value: int
) -> None:
    fake = FakeNvml(mine, 900)
    monkeypatch.setattr(dm, "start_nvml", lambda: (fake, None))
    d = dm.DeviceMemory(True)
    d.read("before_session")
    d.read("steady")
    assert d.reading() == {"scope": scope, "bytes": {"before_session": value, "steady": value}}
    d.close()
    assert fake.shut


def test_a_cpu_run_reads_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dm, "start_nvml", lambda: pytest.fail("NVML started for a CPU run"))
    d = dm.DeviceMemory(False)
    d.read("steady")
    assert d.reading() == {}
