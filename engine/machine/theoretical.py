"""The CPU's theoretical float32 peak, an upper bound drawn above the measured compute
roof (issue #26) and the ceiling a measured roof is checked against (issue #49): physical
cores x clock x float32 lanes per vector x 2 (a fused multiply-add is two FLOPs) x
FMA_PIPES. The pipes per core are not in /proc/cpuinfo, so the most any x86 core has (two)
is assumed: the figure bounds from above, never from below.

The clock is the maximum the OS gives (cpufreq, psutil); many VMs give none, and then the
base clock /proc/cpuinfo names ("@ 2.20GHz" in the model name, else "cpu MHz") stands in,
said as such: a turbo clock may exceed it, so a check allows TURBO_ALLOWANCE above it. No
clock at all: no ceiling rather than a guessed one.

The integer roof's ceiling is the float one times what the instruction set allows for
8-bit products (`INT8_FACTOR`): VNNI's dot product does 4 u8 x s8 multiply-adds where an
FMA does one float32 (4x), AMX tiles 1,024 multiply-adds a cycle against 32 float32 FMAs
(32x); without either, the 16-bit multiply-add path at most 2x."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

FMA_PIPES = 2
MAX_FREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
CPUINFO = Path("/proc/cpuinfo")
TURBO_ALLOWANCE = 2.0  # a base clock times this bounds the turbo of any CPU sold today
INT8_FACTOR = {"amx": 32.0, "vnni": 4.0, "avx2": 2.0, "arm": 8.0, "other": 4.0}
ISA_NAME = {"amx": "AMX", "vnni": "VNNI", "avx2": "no VNNI", "arm": "Arm i8mm at most",
            "other": "an unknown ISA"}  # fmt: skip


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


@dataclass(frozen=True)
class Ceiling:
    """This CPU's compute ceilings: float32 at the clock known, and how far integers may go."""

    gflops: float  # float32 at `ghz`
    text: str  # how it was reckoned
    base_clock: bool  # the clock is a base clock (a turbo may exceed it), not the maximum
    isa: str  # engine.hostinfo.cpu_isa(): "amx", "vnni", "avx2", "arm", "other"

    @property
    def fp32_limit(self) -> float:
        """The most a float32 roof can be: the ceiling, with a turbo's room on a base clock."""
        return self.gflops * (TURBO_ALLOWANCE if self.base_clock else 1.0)

    @property
    def int8_factor(self) -> float:
        return INT8_FACTOR.get(self.isa, INT8_FACTOR["other"])


def clock_khz(text: str) -> tuple[float, bool] | None:
    """(kHz, whether it is only a base clock): cpufreq's maximum (psutil, sysfs), else the
    model name's "@ 2.20GHz", else /proc/cpuinfo's "cpu MHz"; None when nothing says."""
    try:
        import psutil

        freq = psutil.cpu_freq()
        if freq is not None and freq.max and freq.max > 0:
            return float(freq.max) * 1e3, False
    except Exception:  # no cpufreq here: the files below
        pass
    try:
        khz = float(MAX_FREQ.read_text().strip())
        if khz > 0:
            return khz, False
    except (OSError, ValueError):
        pass
    named = re.search(r"^model name\s*:.*@\s*([0-9.]+)\s*GHz", text, re.MULTILINE)
    if named:
        return float(named.group(1)) * 1e6, True
    mhz = re.search(r"^cpu MHz\s*:\s*([0-9.]+)", text, re.MULTILINE)
    if mhz and float(mhz.group(1)) > 0:
        return float(mhz.group(1)) * 1e3, True
    return None


@cache
def cpu_ceiling() -> Ceiling | None:
    """This machine's `Ceiling`, or None where no clock is known."""
    from engine.hostinfo import cpu_isa

    try:
        text = CPUINFO.read_text(errors="replace")
    except OSError:
        text = ""
    clock = clock_khz(text)
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            flags = set(line.split(":", 1)[1].split())
            break
    import psutil

    cores = psutil.cpu_count(logical=False) or 0
    if clock is None or cores <= 0:
        return None
    khz, base = clock
    how = describe(cores, khz, flags)
    if base:
        how += "; a base clock from /proc/cpuinfo (a turbo may run faster)"
    return Ceiling(theoretical_gflops(cores, khz, flags), how, base, cpu_isa())


def cpu_theoretical() -> tuple[float, str] | None:
    """(GFLOP/s, how it was reckoned) for this machine, or None where no clock is known."""
    c = cpu_ceiling()
    return None if c is None else (c.gflops, c.text)
