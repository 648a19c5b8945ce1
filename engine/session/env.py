"""The machine a session was recorded on: host, OS, CPU, GPU and driver, library versions.

Cheap and never raises: versions come from package metadata (no heavy imports) and the
GPU from NVML when `pynvml` is importable and a driver answers; otherwise null.
"""

from __future__ import annotations

import contextlib
import os
import platform
import socket
import sqlite3
from importlib import metadata
from pathlib import Path

from engine import __version__


def host_facts() -> dict[str, str | None]:
    """Text facts for the session's `meta` table (None where unknown)."""
    gpu, driver = gpu_facts()
    return {
        "app_version": __version__,
        "host": socket.gethostname() or None,
        "os": platform.platform(),
        "python": platform.python_version(),
        "cpu": cpu_name(),
        "cpu_count": str(os.cpu_count() or "") or None,
        "gpu": gpu,
        "gpu_driver": driver,
        "onnxruntime": _version("onnxruntime-gpu") or _version("onnxruntime"),
        "onnx": _version("onnx"),
        "numpy": _version("numpy"),
        "sqlite": sqlite3.sqlite_version,
        "sqlite_utils": _version("sqlite-utils"),
    }


def cpu_name() -> str | None:
    """The CPU model name (Linux: /proc/cpuinfo; elsewhere what `platform` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Hardware", "Processor") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or None


def gpu_facts() -> tuple[str | None, str | None]:
    """('NVIDIA H200' or 'A; B' for several GPUs, driver version), or (None, None)."""
    try:
        import pynvml
    except ImportError:
        return None, None
    try:
        pynvml.nvmlInit()
    except Exception:  # pynvml.NVMLError_LibraryNotFound and friends: no driver
        return None, None
    try:
        count = int(pynvml.nvmlDeviceGetCount())
        if count == 0:
            return None, None
        names = [
            _text(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)))
            for i in range(count)
        ]
        return "; ".join(names), _text(pynvml.nvmlSystemGetDriverVersion())
    except Exception:
        return None, None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None
