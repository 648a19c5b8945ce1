"""Facts about this host that several parts need, each written once: installed package
versions (read from metadata, so torch stays unimported), the CPU's model name, and NVML
opened and shut down safely. Cheap, and never raises."""

from __future__ import annotations

import contextlib
import os
import platform
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any


def package_version(name: str) -> str | None:
    """An installed distribution's version without importing it, or None."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def ort_version() -> str | None:
    """ONNX Runtime's version, whichever of its two packages is installed."""
    return package_version("onnxruntime-gpu") or package_version("onnxruntime")


def library_versions(*names: str) -> dict[str, str | None]:
    """Each name's installed version (None when absent), keyed with '_' for '-':
    "python" is the interpreter, "onnxruntime" whichever of its two packages is there."""

    def one(name: str) -> str | None:
        if name == "python":
            return platform.python_version()
        return ort_version() if name == "onnxruntime" else package_version(name)

    return {name.replace("-", "_"): one(name) for name in names}


def host_name() -> str | None:
    """This host's name: $OPSCOPE_HOST_NAME where set (a container's random hostname named
    as the machine it stands for), else its network name, or None when it has none."""
    return os.environ.get("OPSCOPE_HOST_NAME") or platform.node() or None


def machine_key(*libraries: str) -> dict[str, str | None]:
    """What a cached measurement of this machine depends on (peaks, serving and LLM
    calibrations): the CPU model, the host name and the versions of ONNX Runtime and
    `libraries`."""
    return {"cpu": cpu_model(), "host": host_name(), **library_versions("onnxruntime", *libraries)}


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo, ARM boards included; elsewhere what
    `platform` knows; "unknown" when nothing says)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Hardware", "Processor") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def cpu_isa() -> str:
    """The instruction set that decides how INT8 runs on this CPU: "amx" (AMX tiles),
    "vnni" (AVX-512 VNNI or AVX-VNNI: 8-bit dot products without int16 saturation),
    "avx2" (x86 without VNNI: u8 x s8 products saturate, weights want reduce_range),
    "arm" or "other"."""
    flags: set[str] = set()
    try:
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("flags", "Features"):
                flags = set(value.split())
                break
    except OSError:
        pass
    if not flags:  # not Linux: what NumPy's dispatcher found
        with contextlib.suppress(Exception):
            from numpy._core._multiarray_umath import __cpu_features__ as features

            flags = {k.lower() for k, v in features.items() if v}
            if "avx512vnni" in flags:
                flags.add("avx512_vnni")
    if "amx_int8" in flags or "amx_tile" in flags:
        return "amx"
    if flags & {"avx512_vnni", "avx_vnni"}:
        return "vnni"
    if "avx2" in flags:
        return "avx2"
    machine = platform.machine().lower()
    return "arm" if machine.startswith(("arm", "aarch")) else "other"


def text(value: object) -> str:
    """An NVML string (bytes in older nvidia-ml-py) as text."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


NO_DRIVER = "no NVIDIA driver (NVML library not found)"


def start_nvml(lib: Any = None) -> tuple[Any, str | None]:
    """NVML initialised: (pynvml, or `lib` standing in for it, None), or (None, why not).
    The caller shuts it down (`nvml()` does, for a short look)."""
    if lib is None:
        try:
            import pynvml
        except ImportError:
            return None, "nvidia-ml-py is not installed"
        lib = pynvml
    try:
        lib.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound: no driver; others say why
        not_found = getattr(lib, "NVMLError_LibraryNotFound", None)
        if isinstance(not_found, type) and isinstance(exc, not_found):
            return None, NO_DRIVER
        if "Not Found" in str(exc):
            return None, NO_DRIVER
        return None, f"NVML failed to start: {exc}"
    return lib, None


@contextlib.contextmanager
def nvml(lib: Any = None) -> Iterator[tuple[Any, str | None]]:
    """(pynvml initialised, None), or (None, why not); NVML is shut down afterwards."""
    started, reason = start_nvml(lib)
    try:
        yield started, reason
    finally:
        if started is not None:
            with contextlib.suppress(Exception):
                started.nvmlShutdown()


def gpu_count() -> int:
    """How many NVIDIA GPUs NVML sees (0 without a driver or on any failure)."""
    with nvml() as (lib, _):
        if lib is None:
            return 0
        try:
            return int(lib.nvmlDeviceGetCount())
        except Exception:
            return 0
