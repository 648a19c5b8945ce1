"""Reading a traffic trace (CSV: a time column, optional `key` and `size` columns by header
name) fast and within bounds: blocks of lines parsed by numpy (ten million rows in
seconds, where a row at a time took a minute), a line longer than MAX_LINE refused before
it is held (one line of a GB took 2 GB), each value checked in bounds, and a bad line
named by its number (a block that fails is read again row by row to find it). A long
read says how far it got on stderr."""

from __future__ import annotations

import csv
import io
import math
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from engine.errors import InputError

MAX_REQUESTS = 50_000_000  # rows a trace may hold (engine.serve.traffic.schedule's limit)
MAX_LINE = 65_536  # characters of one line
MAX_TIME_S = 1e9  # |time| of an arrival, seconds (31 years)
MAX_SIZE = 2**31 - 1  # a request's size (tokens, or elements of a dim)
BLOCK = 8 << 20  # bytes read and parsed at once
PROGRESS_BYTES = 64 << 20  # a trace larger than this says how far its read got
PROGRESS_S = 2.0


class _Columns:
    def __init__(self) -> None:
        self.header_seen = False
        self.key: int | None = None
        self.size: int | None = None


def read_trace(path: str) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Arrival times (s, shifted to start at 0), keys and sizes; a bad line is named in a
    one-line error."""
    p = Path(path)
    if not p.is_file():
        raise InputError("traffic trace not found (or not a regular file)", path)
    cols = _Columns()
    times: list[np.ndarray] = []
    sizes: list[np.ndarray] = []
    keys: list[str] = []
    last = -math.inf  # the previous block's last time
    rows = 0
    try:
        total = p.stat().st_size
        shown = time.monotonic()
        with p.open("rb") as fh:
            for first_line, block, done in _blocks(fh, path):
                # utf-8-sig: a byte order mark (Windows tools write one) is not text
                lines = block.decode("utf-8-sig", errors="replace").split("\n")
                if not cols.header_seen:
                    first_line, lines = _header(lines, first_line, cols)
                t, s, k = _parse(lines, first_line, cols, last, path)
                if t.size:
                    last = float(t[-1])
                    times.append(t)
                    rows += t.size
                    if s is not None:
                        sizes.append(s)
                    keys += k
                if rows > MAX_REQUESTS:
                    raise InputError(f"more than {MAX_REQUESTS:,} requests", path)
                if total > PROGRESS_BYTES and time.monotonic() - shown > PROGRESS_S:
                    shown = time.monotonic()
                    print(f"reading trace {path}: {done / total:.0%} ({rows:,} requests)",
                          file=sys.stderr, flush=True)  # fmt: skip
    except OSError as exc:
        raise InputError(f"cannot read the trace ({exc})", path) from exc
    if not rows:
        raise InputError("the trace has no arrival times", path)
    arr = np.concatenate(times)
    arr -= arr[0]
    key_arr = None
    if cols.key is not None:
        index: dict[str, int] = {}
        key_arr = np.array([index.setdefault(k, len(index)) for k in keys], dtype=np.int64)
    size_arr = np.concatenate(sizes) if cols.size is not None else None
    return arr, key_arr, size_arr


def _blocks(fh: BinaryIO, path: str) -> Iterator[tuple[int, bytes, int]]:
    """(number of the block's first line, whole lines as bytes, bytes read so far)."""
    line, done, rest = 1, 0, b""
    while True:
        data = fh.read(BLOCK)
        done += len(data)
        buf = rest + data
        cut = buf.rfind(b"\n") + 1 if data else len(buf)
        whole, rest = buf[:cut], buf[cut:]
        if len(rest) > MAX_LINE:
            n = line + whole.count(b"\n")
            raise InputError(f"line {n}: longer than {MAX_LINE:,} characters", path)
        if whole:
            _long_line(whole, line, path)
            yield line, whole, done
            line += whole.count(b"\n")
        if not data:
            return


def _long_line(block: bytes, line: int, path: str) -> None:
    if len(block) <= MAX_LINE:
        return
    ends = np.flatnonzero(np.frombuffer(block, np.uint8) == 10)
    lengths = np.diff(np.concatenate([[-1], ends, [len(block)]])) - 1
    long = np.flatnonzero(lengths > MAX_LINE)
    if long.size:
        raise InputError(f"line {line + int(long[0])}: longer than {MAX_LINE:,} characters", path)


def _header(lines: list[str], first: int, cols: _Columns) -> tuple[int, list[str]]:
    """The header, if the first data line is one: its columns read, its line dropped."""
    for i, text in enumerate(lines):
        cells = next(csv.reader([text]), [])
        if not cells or not "".join(cells).strip() or cells[0].lstrip().startswith("#"):
            continue
        cols.header_seen = True
        if _is_number(cells[0]):
            return first, lines
        header = [c.strip().lower() for c in cells]
        cols.key = header.index("key") if "key" in header else None
        cols.size = header.index("size") if "size" in header else None
        lines = lines.copy()
        lines[i] = ""  # kept as a blank line: the line numbers stay
        return first, lines
    return first, lines


def _parse(
    lines: list[str], first: int, cols: _Columns, last: float, path: str
) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
    """A block's times, sizes and keys: numpy's parser, checked by vectors; on any
    failure, row by row, which names the line."""
    try:
        if cols.key is not None or any('"' in ln for ln in lines):
            raise ValueError("rows")  # quoted cells and keys: the csv module reads them
        use = (0,) if cols.size is None else (0, cols.size)
        with warnings.catch_warnings():  # a block of comments only: "no data", said once
            warnings.simplefilter("ignore")
            data = np.loadtxt(io.StringIO("\n".join(lines)), delimiter=",", usecols=use,
                              comments="#", ndmin=2, dtype=np.float64)  # fmt: skip
        t = data[:, 0]
        if t.size and not _good_times(t, last):
            raise ValueError("times")
        if cols.size is None:
            return t, None, []
        s = data[:, 1]
        if s.size and not (np.all(s >= 1) and np.all(s <= MAX_SIZE) and np.all(s == np.floor(s))):
            raise ValueError("sizes")
        return t, s.astype(np.int64), []
    except ValueError:
        return _parse_rows(lines, first, cols, last, path)


def _good_times(t: np.ndarray, last: float) -> bool:
    return bool(np.all(np.abs(t) <= MAX_TIME_S) and t[0] >= last and np.all(np.diff(t) >= 0))


def _parse_rows(
    lines: list[str], first: int, cols: _Columns, last: float, path: str
) -> tuple[np.ndarray, np.ndarray | None, list[str]]:
    times: list[float] = []
    sizes: list[int] = []
    keys: list[str] = []
    try:
        for lineno, row in enumerate(csv.reader(lines), start=first):
            if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
                continue
            t = _cell(path, lineno, row, 0, "time")
            if abs(t) > MAX_TIME_S:
                raise InputError(f"line {lineno}: time {t:g} is past {MAX_TIME_S:g} s", path)
            if t < (times[-1] if times else last):
                raise InputError(f"line {lineno}: time {t:g} goes back in time", path)
            times.append(t)
            if cols.key is not None:
                keys.append(row[cols.key].strip() if cols.key < len(row) else "")
            if cols.size is not None:
                size = _cell(path, lineno, row, cols.size, "size")
                if not 1 <= size <= MAX_SIZE or size != int(size):
                    raise InputError(
                        f"line {lineno}: size must be an integer from 1 to {MAX_SIZE:,}, "
                        f"got {row[cols.size].strip()}",
                        path,
                    )
                sizes.append(int(size))
    except csv.Error as exc:
        raise InputError(f"cannot read the trace ({exc})", path) from exc
    size_arr = np.asarray(sizes, np.int64) if cols.size is not None else None
    return np.asarray(times, np.float64), size_arr, keys


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def _cell(path: str, lineno: int, row: list[str], col: int, what: str) -> float:
    if col >= len(row):
        raise InputError(f"line {lineno}: no {what} column", path)
    try:
        value = float(row[col])
    except ValueError:
        raise InputError(
            f"line {lineno}: {what} {row[col].strip()!r} is not a number", path
        ) from None
    if not math.isfinite(value):
        raise InputError(f"line {lineno}: {what} must be finite", path)
    return value
