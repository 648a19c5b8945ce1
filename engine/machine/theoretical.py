"""The CPU's theoretical float32 peak, an upper bound drawn above the measured compute
roof (issue #26): physical cores x maximum clock x float32 lanes per vector x 2 (a fused
multiply-add is two FLOPs) x FMA_PIPES. The pipes per core are not in /proc/cpuinfo, so the
most any x86 core has (two) is assumed: the figure bounds from above, never from below.
Known only where the OS gives the maximum clock (cpufreq): in many VMs it does not, and
then there is no theoretical roof rather than a guessed one."""

from __future__ import annotations

from functools import cache
from pathlib import Path

FMA_PIPES = 2
MAX_FREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")


def lanes(flags: set[str]) -> int:
    """float32 lanes per vector instruction the CPU has."""
    if "avx512f" in flags:
        return 16
    if "avx" in flags:
        return 8
    if "sse" in flags or "asimd" in flags or "neon" in flags:
        return 4
    return 1


def theoretical_gflops(cores: int, max_khz: float, flags: set[str]) -> float:
    return cores * max_khz / 1e6 * lanes(flags) * 2 * FMA_PIPES


def describe(cores: int, max_khz: float, flags: set[str]) -> str:
    return (
        f"{cores} cores x {max_khz / 1e6:.2f} GHz x {lanes(flags)} float32 lanes x 2 "
        f"(FMA) x {FMA_PIPES} pipes (assumed)"
    )


@cache
def cpu_theoretical() -> tuple[float, str] | None:
    """(GFLOP/s, how it was reckoned) for this machine, or None where the maximum clock
    is not known."""
    try:
        max_khz = float(MAX_FREQ.read_text().strip())
        text = Path("/proc/cpuinfo").read_text()
    except (OSError, ValueError):
        return None
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            flags = set(line.split(":", 1)[1].split())
            break
    import psutil

    cores = psutil.cpu_count(logical=False) or 0
    if max_khz <= 0 or cores <= 0:
        return None
    return theoretical_gflops(cores, max_khz, flags), describe(cores, max_khz, flags)
