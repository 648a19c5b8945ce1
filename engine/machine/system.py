"""What this machine is: CPU, memory, OS, library versions, ONNX Runtime providers that
really work, NVIDIA GPUs (through NVML), and the measured peaks (engine/machine/peaks.py).

`system_info()` returns the JSON `opscope system` prints; every probe degrades to a value
saying why it is missing instead of raising.
"""

from __future__ import annotations

import platform
import sys
from typing import Any

from engine.hostinfo import (
    NO_DRIVER,
    cpu_model,
    library_versions,
    package_version,
    start_nvml,
)
from engine.machine.peaks import load_peaks

__all__ = ["NO_DRIVER", "cpu_model", "package_version", "system_info"]

NO_GPU = "no NVIDIA GPU"


def cpu_info() -> dict[str, Any]:
    """Model, physical and logical cores, frequencies (MHz, when the OS reports them)."""
    import psutil

    out: dict[str, Any] = {
        "model": cpu_model(),
        "cores": psutil.cpu_count(logical=False),
        "logical_cores": psutil.cpu_count(logical=True),
        "arch": platform.machine(),
    }
    try:
        freq = psutil.cpu_freq()
    except Exception:  # some VMs and containers expose no cpufreq
        freq = None
    out["freq_mhz"] = (
        {
            "current": round(freq.current),
            "min": round(freq.min) or None,
            "max": round(freq.max) or None,
        }
        if freq
        else None
    )
    return out


def versions(nvml: dict[str, Any] | None = None) -> dict[str, str | None]:
    """Python, ONNX Runtime, numpy, onnx, torch (not imported), NVIDIA driver and CUDA."""
    out = library_versions("python", "onnxruntime", "numpy", "onnx", "torch", "nvidia-ml-py")
    out["nvidia_driver"] = (nvml or {}).get("driver")
    out["cuda_driver"] = (nvml or {}).get("cuda")
    return out


def providers_info() -> dict[str, list[str]]:
    """ORT providers: listed as available, and usable (a tiny session really obtained it)."""
    from engine.backends.ort.providers import probe_providers

    return probe_providers()


def nvml_info(nvml: Any = None) -> dict[str, Any]:
    """{"gpus": [...], "reason": str | None, "driver", "cuda"} through NVML (`nvml`: pynvml)."""
    nvml, reason = start_nvml(nvml)
    if nvml is None:
        return {"gpus": [], "reason": reason}
    try:
        driver = _text(_try(nvml.nvmlSystemGetDriverVersion))
        cuda_int = _try(nvml.nvmlSystemGetCudaDriverVersion)
        cuda = f"{cuda_int // 1000}.{cuda_int % 1000 // 10}" if isinstance(cuda_int, int) else None
        gpus = [
            _gpu(nvml, nvml.nvmlDeviceGetHandleByIndex(i), i)
            for i in range(nvml.nvmlDeviceGetCount())
        ]
    finally:
        _try(nvml.nvmlShutdown)
    return {"gpus": gpus, "reason": None if gpus else NO_GPU, "driver": driver, "cuda": cuda}


def _gpu(nvml: Any, h: Any, index: int) -> dict[str, Any]:
    """One GPU's static facts; theoretical bandwidth = max mem clock x bus width x 2 / 8."""
    mem = _try(nvml.nvmlDeviceGetMemoryInfo, h)
    mem_clock = _try(nvml.nvmlDeviceGetMaxClockInfo, h, nvml.NVML_CLOCK_MEM)
    bus_bits = _try(nvml.nvmlDeviceGetMemoryBusWidth, h)
    power = _try(nvml.nvmlDeviceGetPowerManagementLimit, h)
    peak = (
        mem_clock * 1e6 * bus_bits * 2 / 8 / 1e9
        if isinstance(mem_clock, int | float) and isinstance(bus_bits, int | float)
        else None
    )
    return {
        "index": index,
        "name": _text(_try(nvml.nvmlDeviceGetName, h)),
        "memory_gb": round(mem.total / 1e9, 2) if mem is not None else None,
        "sm_clock_max_mhz": _try(nvml.nvmlDeviceGetMaxClockInfo, h, nvml.NVML_CLOCK_SM),
        "mem_clock_max_mhz": mem_clock,
        "memory_bus_bits": bus_bits,
        "power_limit_w": power / 1000 if isinstance(power, int | float) else None,
        "theoretical_gbps": round(peak, 1) if peak is not None else None,
    }


def _try(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:  # NVML calls a GPU does not support raise NotSupported
        return None


def _text(value: Any) -> str | None:
    return value.decode() if isinstance(value, bytes) else value


def system_info(remeasure: bool = False) -> dict[str, Any]:
    """Everything `opscope system` reports, peaks included (cached; measured when missing),
    and how busy the machine was while it looked (`contention`: timings taken now read
    slow when it is busy)."""
    import psutil

    from engine.machine.peaks_trust import judge
    from engine.measure.contention import Window

    window = Window()
    nvml = nvml_info()
    providers = providers_info()
    peaks = load_peaks(remeasure=remeasure, gpu="CUDAExecutionProvider" in providers["usable"])
    now = window.done()
    return {
        "cpu": cpu_info(),
        "memory_gb": round(psutil.virtual_memory().total / 1e9, 2),
        "os": {
            "system": platform.system(),
            "release": platform.release(),
            "platform": platform.platform(),
            "python_impl": sys.implementation.name,
        },
        "versions": versions(nvml),
        "providers": providers,
        "gpus": nvml["gpus"],
        "gpu_reason": nvml["reason"],
        "peaks": {
            "cpu": peaks["cpu"],
            "gpu": peaks.get("gpu"),
            "measured_at": peaks.get("measured_at"),
            "provisional": None if judge(peaks).trusted else judge(peaks).why,
            "trust": judge(peaks).to_json(),
            "rejected": peaks.get("rejected"),
        },
        "contention": now.to_json() if now is not None else None,
    }
