"""What reading a trace will take, known before it is read: its rows from the file's size
and the bytes per row of a first chunk, and the memory the reader holds per row at its
peak (measured on generated traces: bench/trace_read_memory.py). A trace that would take
more than the memory free is refused in one line before it is read: a 50M-row Azure trace
took about 9.5 GB (and an hour) before the simulation's own memory check refused it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.errors import InputError
from engine.serve.traffic.trace_file import BLOCK

FIRST_CHUNK = 1 << 20  # bytes looked at for the bytes per row
# the reader's peak per row (arrays, and per chunk of rows the Python objects a row
# becomes before it is packed) and what it keeps, each measured on 200,000-row traces:
# azure 74 B at the peak, burstgpt 56, mooncake 110 (with 1-3 block hashes), csv 16 kept
# (its 8 MB blocks are the overhead); before, a row held as Python objects: 180-216 B
READ_BYTES_PER_ROW = {"azure": 80, "burstgpt": 64, "mooncake": 112, "csv": 48}
BYTES_PER_HASH = 48  # a Mooncake block hash kept: a Python int and its slot in a tuple
# what is in flight: a CSV block's lines as Python strings (trace_file.BLOCK of them), or
# a chunk of LLM rows as Python objects before they are packed (CHUNK_ROWS of them)
IN_FLIGHT_BYTES_PER_ROW = 220
CHUNK_ROWS = 65_536  # LLM rows held as Python objects at once (trace_formats)


@dataclass(frozen=True)
class TraceSize:
    file_bytes: int
    rows: int  # estimated from the first chunk (exact when the file is that small)
    need_bytes: int  # the reader's peak, estimated


def estimate(path: str, fmt: str) -> TraceSize:
    """The trace's rows and the memory its read takes, from its size and first chunk."""
    p = Path(path)
    try:
        size = p.stat().st_size
        with p.open("rb") as fh:
            head = fh.read(FIRST_CHUNK)
    except OSError as exc:
        raise InputError(f"cannot read the trace ({exc})", path) from exc
    whole = head if len(head) == size else head[: head.rfind(b"\n") + 1]
    lines = max(1, whole.count(b"\n"))
    rows = lines if len(head) == size else round(size / (len(whole) or size) * lines)
    per_row = READ_BYTES_PER_ROW.get(fmt, READ_BYTES_PER_ROW["csv"])
    if fmt == "mooncake":  # each prompt's block hashes are kept: count them in the chunk
        hashes = whole.count(b",") - 2 * lines  # k hashes: k - 1 commas, and 3 between fields
        per_row += BYTES_PER_HASH * max(0, hashes) // lines
    row_bytes = max(1, len(whole)) / lines
    in_flight = min(rows, BLOCK / row_bytes if fmt == "csv" else CHUNK_ROWS)
    need = rows * per_row + int(in_flight * IN_FLIGHT_BYTES_PER_ROW)
    return TraceSize(size, rows, need)


def check_read_fits(path: str, fmt: str, free_bytes: int | None = None) -> TraceSize:
    """Refuse, in one line and before reading it, a trace whose read would take more than
    the memory free (`free_bytes`, else this machine's available memory)."""
    from engine.model.sizes import size_text

    size = estimate(path, fmt)
    if free_bytes is None:
        free_bytes = available_memory()
    if size.need_bytes > free_bytes:
        raise InputError(
            f"about {size.rows:,} requests ({size_text(size.file_bytes)}): reading them "
            f"takes about {size_text(size.need_bytes)}, more than the "
            f"{size_text(free_bytes)} of memory free; replay a part of the trace (a file "
            "of its first lines)",
            path,
        )
    return size


def available_memory() -> int:
    """This machine's memory available now (what the simulation's own check compares with)."""
    import psutil

    return int(psutil.virtual_memory().available)
