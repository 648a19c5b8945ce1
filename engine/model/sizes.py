"""Sizes before allocating: the dtype an input gets, the bytes some inputs would take, and
the one-line refusal past the memory available now."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from engine.errors import InputError
from engine.model.info import ValueInfo


def dtype_of(v: ValueInfo) -> np.dtype[Any]:
    if v.dtype in ("?", ""):
        return np.dtype("float32")
    try:
        return np.dtype(v.dtype)
    except TypeError:  # a type numpy does not name (a string tensor's): an object each
        return np.dtype(object)


MEMORY_SHARE = 0.5  # inputs above this share of the available memory are refused


def check_fits(
    arrays: Mapping[str, tuple[tuple[int, ...], np.dtype[Any]]], path: str, what: str
) -> None:
    """Refuse, in one line, inputs whose bytes would not fit in memory, before allocating
    them (numpy would raise MemoryError, or swap the machine to a halt first)."""
    need = sum(math.prod(shape) * dtype.itemsize for shape, dtype in arrays.values())
    shapes = ", ".join(f"{k} {'x'.join(map(str, s))}" for k, (s, _) in arrays.items())
    check_memory(need, f"{what} inputs {shapes}", "use smaller shapes or a smaller batch", path)


def check_memory(need: float, what: str, advice: str, path: str | None = None) -> None:
    """Refuse, in one line, to allocate `need` bytes when they pass MEMORY_SHARE of the
    memory available now: `{what} would take 12.3 GB, more than half of the 16.0 GB of
    memory available: {advice}`. Every allocation sized by a user's value estimates first
    and calls this."""
    import psutil

    free = psutil.virtual_memory().available
    if need > MEMORY_SHARE * free:
        raise InputError(
            f"{what} would take {size_text(need)}, more than {_share_text()} the "
            f"{size_text(free)} of memory available: {advice}",
            path,
        )


def _share_text() -> str:
    return "half of" if MEMORY_SHARE == 0.5 else f"{MEMORY_SHARE:.0%} of"


def as_bytes(n: int) -> float:
    """`n` bytes (a product of a model's dims) as a float: past what a float holds (rank 64
    of 2^31: 10^597) it is inf, which `size_text` says as "unbounded", never an
    OverflowError."""
    try:
        return float(n)
    except OverflowError:
        return math.inf


HUGE_BYTES = 1e18  # past a million TB a size is said as a power of ten


def size_text(n: float) -> str:
    """`n` bytes in words; any size (a product of a model's dims is an int past what a float
    holds: 2147483648 to the 64th), never an OverflowError."""
    if n >= HUGE_BYTES:
        exponent = math.log10(n)  # exact enough for any int, inf for an infinite float
        return f"about 10^{int(exponent)} bytes" if math.isfinite(exponent) else "unbounded"
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def device_copy_text(copy: dict[str, Any] | None) -> str | None:
    """A memory report's weights-to-the-GPU figure in words (None: not on a GPU)."""
    if not copy:
        return None
    if copy.get("error"):
        return f"weights to the GPU: not measured ({copy['error']})"
    rate = f", {copy['gb_s']:.1f} GB/s" if copy.get("gb_s") else ""
    return (
        f"weights to the GPU {size_text(copy['bytes'])} in {copy['seconds'] * 1e3:.1f} ms"
        f"{rate} ({copy['tensors']} tensors, the runtime's own copy from pageable memory)"
    )
