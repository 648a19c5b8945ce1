"""An NVIDIA GPU's memory as the memory probe reads it (NVML): this process's own use of
the device where NVML can see it (not inside some containers, whose process ids NVML does
not share), else the whole device's used memory, said which. CPU runs read nothing."""

from __future__ import annotations

import contextlib
import os
from typing import Any

from engine.hostinfo import start_nvml


class DeviceMemory:
    """Reads device 0's memory at the probe's stages; `reading()` is {} without a GPU."""

    def __init__(self, enabled: bool) -> None:
        self.lib: Any = None
        self.handle: Any = None
        self.readings: dict[str, int] = {}
        self.scope = ""  # 'process' or 'device'
        if enabled:
            lib, _why = start_nvml()
            if lib is not None:
                try:
                    self.handle = lib.nvmlDeviceGetHandleByIndex(0)
                    self.lib = lib
                except Exception:
                    lib.nvmlShutdown()

    def read(self, stage: str) -> None:
        if self.lib is None:
            return
        try:
            mine = [
                p.usedGpuMemory
                for p in self.lib.nvmlDeviceGetComputeRunningProcesses(self.handle)
                if p.pid == os.getpid() and p.usedGpuMemory
            ]
        except Exception:
            mine = []
        if mine and self.scope != "device":
            self.scope = "process"
            self.readings[stage] = int(mine[0])
            return
        try:
            self.scope = "device"
            self.readings[stage] = int(self.lib.nvmlDeviceGetMemoryInfo(self.handle).used)
        except Exception:
            return

    def reading(self) -> dict[str, Any]:
        return {"scope": self.scope, "bytes": dict(self.readings)} if self.readings else {}

    def close(self) -> None:
        if self.lib is not None:
            with contextlib.suppress(Exception):
                self.lib.nvmlShutdown()
            self.lib = None
