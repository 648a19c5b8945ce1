"""The machine a session was recorded on: host, OS, CPU, GPU and driver, library versions.

Cheap and never raises: versions come from package metadata (no heavy imports) and the
GPU from NVML when `pynvml` is importable and a driver answers; otherwise null.
"""

from __future__ import annotations

import os
import platform
import sqlite3

from engine import __version__
from engine.hostinfo import cpu_model, host_name, library_versions, nvml, text

MACHINE_PREFIX = "machine:"  # meta keys of other machines the session's runs ran on
# host_facts()'s keys
FACTS = ("app_version", "host", "os", "python", "cpu", "cpu_count", "gpu", "gpu_driver",
         "onnxruntime", "onnx", "numpy", "sqlite", "sqlite_utils")  # fmt: skip


def host_facts() -> dict[str, str | None]:
    """Text facts for the session's `meta` table (None where unknown)."""
    gpu, driver = gpu_facts()
    return {
        "app_version": __version__,
        "host": host_name(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "cpu": cpu_name(),
        "cpu_count": str(os.cpu_count() or "") or None,
        "gpu": gpu,
        "gpu_driver": driver,
        **library_versions("onnxruntime", "onnx", "numpy"),
        "sqlite": sqlite3.sqlite_version,
        **library_versions("sqlite-utils"),
    }


def cpu_name() -> str | None:
    """The CPU model name, or None when nothing says."""
    name = cpu_model()
    return None if name == "unknown" else name


def gpu_facts() -> tuple[str | None, str | None]:
    """('NVIDIA H200' or 'A; B' for several GPUs, driver version), or (None, None)."""
    with nvml() as (lib, _):
        if lib is None:
            return None, None
        try:
            count = int(lib.nvmlDeviceGetCount())
            if count == 0:
                return None, None
            names = [
                text(lib.nvmlDeviceGetName(lib.nvmlDeviceGetHandleByIndex(i))) for i in range(count)
            ]
            return "; ".join(names), text(lib.nvmlSystemGetDriverVersion())
        except Exception:
            return None, None
