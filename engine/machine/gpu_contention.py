"""How busy a GPU was while a GPU run was measured, through NVML: the SM utilisation other
processes had on it (nvmlDeviceGetProcessUtilization, which keeps per-process samples of
about the last second and a half, so a window is read at least that often), and the
clock slowdowns it reported (power cap, thermal, hardware slowdown; idle and application
clocks are not slowdowns). It feeds engine/measure/contention.py's probe as its `gpu`.

Written against nvidia-ml-py 13's pynvml; like gpu_telemetry.py, the real-GPU path has
NOT run on a GPU here: it is tested with a fake pynvml.
"""

from __future__ import annotations

import os
import time
from typing import Any

from engine.hostinfo import start_nvml
from engine.machine.gpu_telemetry import BENIGN_THROTTLE, THROTTLE_REASONS
from engine.measure.contention import ContentionProbe, Window


class NvmlLoad:
    """The GPU `index`'s load by other processes, and its slowdowns, between marks."""

    def __init__(self, index: int = 0, nvml: Any = None) -> None:
        nvml, reason = start_nvml(nvml)
        if nvml is None:
            raise RuntimeError(reason or "NVML unavailable")
        self._nvml = nvml
        self._handle = nvml.nvmlDeviceGetHandleByIndex(index)
        self._me = os.getpid()

    def mark(self) -> tuple[int, int]:
        """(NVML's clock now, in microseconds since the epoch; the slowdowns now)."""
        return int(time.time() * 1e6), self._reasons()

    def since(self, mark: Any) -> tuple[float | None, str | None]:
        """Other processes' mean SM utilisation since `mark` (percent; 0 when NVML kept no
        sample of anyone) and the slowdowns seen at either end, in words."""
        stamp, before = mark
        reasons = (int(before) | self._reasons()) & ~BENIGN_THROTTLE
        slow = ", ".join(name for bit, name in THROTTLE_REASONS.items() if reasons & bit)
        return self._others(int(stamp)), slow or None

    def _others(self, stamp: int) -> float | None:
        nvml = self._nvml
        try:
            samples = nvml.nvmlDeviceGetProcessUtilization(self._handle, stamp)
        except Exception as exc:
            not_found = getattr(nvml, "NVMLError_NotFound", None)
            if isinstance(not_found, type) and isinstance(exc, not_found):
                return 0.0  # no process used the GPU since the mark
            return None  # not supported here: unknown, not quiet
        by_time: dict[int, float] = {}
        for s in samples:
            t = int(getattr(s, "timeStamp", 0))
            mine = int(getattr(s, "pid", -1)) == self._me
            by_time[t] = by_time.get(t, 0.0) + (0.0 if mine else float(getattr(s, "smUtil", 0)))
        return sum(by_time.values()) / len(by_time) if by_time else 0.0

    def _reasons(self) -> int:
        nvml = self._nvml
        read = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        try:
            return int(read(self._handle)) if read is not None else 0
        except Exception:
            return 0


def window_for(provider: str, device: int = 0, nvml: Any = None) -> Window:
    """A contention window for a run on `provider`: with the GPU's load where the run is
    on an NVIDIA GPU and NVML answers, the CPU's alone otherwise."""
    gpu = None
    if provider.startswith(("CUDA", "Tensorrt", "cuda")):
        try:
            gpu = NvmlLoad(device, nvml)
        except Exception:  # no driver or no NVML: the CPU side still says how busy
            gpu = None
    try:
        return Window(ContentionProbe(gpu=gpu))
    except Exception:
        return Window()
