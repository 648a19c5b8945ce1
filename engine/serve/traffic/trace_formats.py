"""Production traces engineers replay (issue #28), detected from their first line:

- Azure LLM inference traces (2023/2024, CSV): `TIMESTAMP,ContextTokens,GeneratedTokens`,
  timestamps as dates (`2023-11-16 18:15:46.6805900`);
- BurstGPT (CSV): `Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`,
  timestamps in seconds;
- Mooncake (JSONL): `{"timestamp": ms, "input_length": n, "output_length": m,
  "hash_ids": [...]}` (hash_ids: the prompt's blocks, for prefix caching);
- OpScope's own CSV (a time column, optional key and size columns: trace_file.py).

Each gives arrival times (s from the first request), and for the LLM formats the prompt
and output token counts and, for Mooncake, each prompt's block hashes. A bad row is named
by its line number in one line: times that go back or are negative, token counts of zero
or past MAX_TOKENS, a row with a missing or non-numeric field.

Before a trace is read, what its read will take is estimated from its size and first chunk
and refused in one line if more than the memory free (trace_size.py); while it is read,
its rows are packed into arrays a chunk at a time (a row held as Python objects took about
200 bytes: 9.5 GB for 50 million), and a long read says how far it got."""

from __future__ import annotations

import csv
import math
import re
import sys
import time
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TextIO

import numpy as np

from engine.errors import InputError
from engine.files import loads_json
from engine.serve.traffic import trace_size
from engine.serve.traffic.trace_file import MAX_LINE, MAX_REQUESTS, PROGRESS_S, read_trace
from engine.serve.traffic.trace_size import check_read_fits

MAX_TOKENS = 10_000_000  # tokens of one prompt or output (no model's context is longer)
MAX_HASHES = 100_000  # block hashes of one Mooncake prompt
PROGRESS_ROWS = 50_000  # a read looks at the clock this often
CHUNK_ROWS = trace_size.CHUNK_ROWS  # rows held as text before their times become numbers
MAX_STAMP_S = 1e11  # |timestamp| in seconds (3,000 years: an epoch time in s fits)
# a numeric Azure timestamp's unit from its size: ns past 1e17, us past 1e14, ms past 1e11
EPOCH_UNITS = ((1e17, 1e9), (1e14, 1e6), (1e11, 1e3))
NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
FORMATS = ("azure", "burstgpt", "mooncake", "csv")


@dataclass(frozen=True)
class Trace:
    format: str  # one of FORMATS
    times: np.ndarray  # float64 s from the first request, non-decreasing
    keys: np.ndarray | None = None  # int64 content keys (csv's key column)
    inputs: np.ndarray | None = None  # int64 prompt tokens (csv: its size column)
    outputs: np.ndarray | None = None  # int64 output tokens
    hash_ids: tuple[tuple[int, ...], ...] | None = None  # Mooncake's prompt blocks

    def __len__(self) -> int:
        return int(self.times.size)


def read_cached(path: str) -> Trace:
    """`read_any_trace`, kept while the file is unchanged (size and mtime): the What-if
    replays the same trace at every slider move."""
    try:
        st = Path(path).stat()
    except OSError:
        return read_any_trace(path)  # says why, in its words
    return _read_cached(path, st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=4)
def _read_cached(path: str, size: int, mtime_ns: int) -> Trace:
    del size, mtime_ns  # the key: a changed file is read again
    return read_any_trace(path)


def sniff(path: str) -> str:
    """The trace's format from its first line (one of FORMATS; 'csv' when unreadable: the
    read that follows says why)."""
    try:
        first = _first_line(Path(path), path)
    except InputError:
        return "csv"
    if first.lstrip().startswith("{"):
        return "mooncake"
    header = [c.strip().lower() for c in next(csv.reader([first]), [])]
    if "contexttokens" in header and "generatedtokens" in header:
        return "azure"
    if "request tokens" in header and "response tokens" in header:
        return "burstgpt"
    return "csv"


def read_any_trace(path: str, free_bytes: int | None = None) -> Trace:
    """The trace at `path`, its format detected from its first non-empty line; refused
    before it is read when reading it would take more than the memory free (`free_bytes`,
    else this machine's)."""
    p = Path(path)
    if not p.is_file():
        raise InputError("traffic trace not found (or not a regular file)", path)
    first = _first_line(p, path)
    fmt = sniff(path)
    rows = check_read_fits(path, fmt, free_bytes).rows
    if fmt == "mooncake":
        return _mooncake(p, path, rows)
    header = [c.strip().lower() for c in next(csv.reader([first]), [])]
    if fmt == "azure":
        return _token_csv(
            p, path, "azure", header, ("timestamp", "contexttokens", "generatedtokens"), rows
        )
    if fmt == "burstgpt":
        return _token_csv(
            p, path, "burstgpt", header, ("timestamp", "request tokens", "response tokens"), rows
        )
    data = _first_line(p, path, skip=1 if header and not _number(header[0]) else 0)
    cell = next(csv.reader([data]), [""])[0].strip() if data else "0"
    if not _number(cell) and not cell.startswith("#"):
        raise InputError(
            f"unknown trace format (first line {first.strip()[:60]!r}); expected Azure "
            "(TIMESTAMP,ContextTokens,GeneratedTokens), BurstGPT (Timestamp,...,Request "
            "tokens,Response tokens,...), Mooncake JSONL, or a CSV whose first column is "
            "the time in seconds",
            path,
        )
    times, keys, sizes = read_trace(path)
    return Trace("csv", times, keys, sizes)


def _first_line(p: Path, path: str, skip: int = 0) -> str:
    """The first non-empty line after `skip` of them ('' past the end when skipping)."""
    try:
        with p.open("r", encoding="utf-8-sig", errors="replace") as fh:
            for line in bounded_lines(fh, path, MAX_LINE):
                if line.strip():
                    if not skip:
                        return line
                    skip -= 1
    except OSError as exc:
        raise InputError(f"cannot read the trace ({exc})", path) from exc
    if skip:
        return ""
    raise InputError("the trace is empty", path)


def bounded_lines(fh: TextIO, path: str, limit: int) -> Iterator[str]:
    """The lines of `fh`, each read at most `limit` characters at a time: a longer one is
    refused, naming it, before it is held (iterating a file reads a whole line: a trace of
    one 1 GB line took 2.1 GB to be refused)."""
    n = 0
    while True:
        line = fh.readline(limit + 1)
        if not line:
            return
        n += 1
        if len(line) > limit and not (len(line) == limit + 1 and line.endswith("\n")):
            raise InputError(f"line {n}: longer than {limit:,} characters", path)
        yield line


def _token_csv(
    p: Path, path: str, fmt: str, header: list[str], cols: tuple[str, str, str], about: int
) -> Trace:
    t_col, in_col, out_col = cols
    it, ii, io = (
        header.index(t_col) if t_col in header else 0,
        header.index(in_col),
        header.index(out_col),
    )
    stamps: list[str] = []  # the chunk's, as text, until it becomes numbers
    parts: list[np.ndarray] = []  # the chunks' times: Azure dates in ns, else numbers
    kind = "seconds"  # BurstGPT's; Azure's "dates" or "epoch", from its first timestamp
    inputs, outputs, lines = array("q"), array("q"), array("q")
    said = time.monotonic()
    try:
        with p.open("r", encoding="utf-8-sig", errors="replace", newline="") as fh:
            rows = csv.reader(bounded_lines(fh, path, MAX_LINE))
            next(rows)  # the header
            for row in rows:
                n = rows.line_num
                if not row or not "".join(row).strip():
                    continue
                if max(it, ii, io) >= len(row):
                    raise InputError(
                        f"line {n}: {len(row)} fields, the header has {len(header)}", path
                    )
                stamps.append(row[it].strip())
                inputs.append(_tokens(row[ii], n, header[ii], path))
                outputs.append(_tokens(row[io], n, header[io], path))
                lines.append(n)
                if len(lines) == 1 and fmt == "azure":
                    kind = "epoch" if NUMBER.fullmatch(stamps[0]) else "dates"
                if len(stamps) == CHUNK_ROWS:
                    parts.append(_stamps(stamps, lines[-len(stamps) :], kind, path))
                    stamps.clear()
                if len(lines) > MAX_REQUESTS:
                    raise InputError(f"more than {MAX_REQUESTS:,} requests", path)
                if not len(lines) % PROGRESS_ROWS:
                    said = _progress(path, len(lines), said, about)
    except (OSError, csv.Error) as exc:
        raise InputError(f"cannot read the trace ({exc})", path) from exc
    if not lines:
        raise InputError("the trace has no requests", path)
    if stamps:
        parts.append(_stamps(stamps, lines[-len(stamps) :], kind, path))
    raw = np.concatenate(parts)
    del parts
    if kind == "dates":
        times = (raw - raw[0]).astype(np.float64) / 1e9
    elif kind == "epoch":
        times = _epoch_scaled(raw, lines, path)
    else:
        times = raw
    _check_times(times, lines, path)
    return Trace(
        fmt, times - times[0], None, np.asarray(inputs, np.int64), np.asarray(outputs, np.int64)
    )


def _stamps(stamps: list[str], lines: array[int], kind: str, path: str) -> np.ndarray:
    """A chunk's timestamps: Azure dates as int64 ns, numbers as float64 (as written)."""
    if kind == "epoch":
        return _numbers(stamps, lines, path)
    if kind == "seconds":
        out = np.empty(len(stamps), np.float64)
        for i, (s, n) in enumerate(zip(stamps, lines, strict=True)):
            out[i] = _finite(s, n, "timestamp", path)
        return out
    try:
        t = np.array(stamps, dtype="datetime64[ns]")
    except ValueError:
        for s, n in zip(stamps, lines, strict=True):  # name the bad one
            try:
                np.datetime64(s, "ns")
            except ValueError:
                raise InputError(f"line {n}: timestamp {s[:40]!r} is not a date", path) from None
        raise
    if np.isnat(t).any():
        n = lines[int(np.flatnonzero(np.isnat(t))[0])]
        raise InputError(f"line {n}: no timestamp", path)
    ns: np.ndarray = t.astype(np.int64)
    return ns


def _mooncake(p: Path, path: str, about: int) -> Trace:
    times, inputs, outputs, lines = array("d"), array("q"), array("q"), array("q")
    hashes: list[tuple[int, ...]] = []
    said = time.monotonic()
    try:
        with p.open("r", encoding="utf-8-sig", errors="replace") as fh:
            for n, line in enumerate(bounded_lines(fh, path, MAX_LINE * 16), start=1):
                if not line.strip():
                    continue
                try:
                    row = loads_json(line)
                except ValueError:
                    raise InputError(f"line {n}: not a JSON object", path) from None
                if not isinstance(row, dict):
                    raise InputError(f"line {n}: not a JSON object", path)
                for key in ("timestamp", "input_length", "output_length"):
                    if key not in row:
                        raise InputError(f"line {n}: no {key}", path)
                times.append(_stamp_ms(row["timestamp"], n, path) / 1000.0)
                inputs.append(_tokens(row["input_length"], n, "input_length", path))
                outputs.append(_tokens(row["output_length"], n, "output_length", path))
                ids = row.get("hash_ids", [])
                if (
                    not isinstance(ids, list)
                    or len(ids) > MAX_HASHES
                    or not all(isinstance(h, int) and not isinstance(h, bool) for h in ids)
                ):
                    raise InputError(f"line {n}: hash_ids must be a list of integers", path)
                hashes.append(tuple(ids))
                lines.append(n)
                if len(lines) > MAX_REQUESTS:
                    raise InputError(f"more than {MAX_REQUESTS:,} requests", path)
                if not len(lines) % PROGRESS_ROWS:
                    said = _progress(path, len(lines), said, about)
    except OSError as exc:
        raise InputError(f"cannot read the trace ({exc})", path) from exc
    if not times:
        raise InputError("the trace has no requests", path)
    arr = np.asarray(times, np.float64)
    _check_times(arr, lines, path)
    return Trace(
        "mooncake",
        arr - arr[0],
        None,
        np.asarray(inputs, np.int64),
        np.asarray(outputs, np.int64),
        tuple(hashes),
    )


def _progress(path: str, rows: int, said: float, about: int) -> float:
    """A long read says how far it got on stderr, every PROGRESS_S at most (a trace of
    ten million rows read for minutes without a word), against the rows its size
    suggested; when it last said so."""
    now = time.monotonic()
    if now - said < PROGRESS_S:
        return said
    share = f" of about {about:,} ({min(rows / about, 1.0):.0%})" if about >= rows else ""
    print(f"reading trace {path}: {rows:,} requests{share} so far", file=sys.stderr,
          flush=True)  # fmt: skip
    return now


def _stamp_ms(value: object, n: int, path: str) -> float:
    """A Mooncake timestamp (ms), within what a trace's times may be."""
    ms = _finite(value, n, "timestamp", path)
    if abs(ms) > MAX_STAMP_S * 1e3:
        raise InputError(f"line {n}: timestamp {ms:g} ms is past {MAX_STAMP_S:g} s", path)
    return ms


def _numbers(stamps: list[str], lines: array[int], path: str) -> np.ndarray:
    """Numeric timestamps as written (Azure's epoch times, scaled once all are read; an
    Azure date among numbers is named: numpy read a bare number as a year)."""
    out = np.empty(len(stamps), np.float64)
    for i, (s, n) in enumerate(zip(stamps, lines, strict=True)):
        if not NUMBER.fullmatch(s):
            raise InputError(f"line {n}: timestamp {s[:40]!r} is not a number like the "
                             "first one's", path)  # fmt: skip
        out[i] = _finite(s, n, "timestamp", path)
    return out


def _epoch_scaled(raw: np.ndarray, lines: array[int], path: str) -> np.ndarray:
    """Numeric Azure timestamps as seconds, the unit chosen by the first one's size: an
    epoch time in seconds is about 1.7e9 today, in ms 1.7e12, in us 1.7e15, in ns 1.7e18
    (a relative time, small, reads as seconds)."""
    first = abs(float(raw[0]))
    scale = next((1.0 / f for limit, f in EPOCH_UNITS if first >= limit), 1.0)
    seconds: np.ndarray = raw * scale
    big = np.flatnonzero(np.abs(seconds) > MAX_STAMP_S)
    if big.size:
        n = lines[int(big[0])]
        raise InputError(f"line {n}: timestamp {raw[big[0]]:g} is past {MAX_STAMP_S:g} s", path)
    return seconds


def _check_times(t: np.ndarray, lines: array[int], path: str) -> None:
    if t.size and t[0] < 0:
        raise InputError(f"line {lines[0]}: negative time {t[0]:g}", path)
    back = np.flatnonzero(np.diff(t) < 0)
    if back.size:
        i = int(back[0]) + 1
        raise InputError(
            f"line {lines[i]}: time goes back (the trace must be sorted by time)", path
        )
    neg = np.flatnonzero(t < 0)
    if neg.size:
        raise InputError(f"line {lines[int(neg[0])]}: negative time", path)


def _finite(value: object, n: int, what: str, path: str) -> float:
    if isinstance(value, bool):  # JSON true/false: Python counts them 1 and 0
        raise InputError(f"line {n}: {what} {str(value).lower()} is not a number", path)
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"line {n}: {what} {str(value)[:40]!r} is not a number", path) from None
    except OverflowError:  # a JSON integer past what a float holds
        raise InputError(f"line {n}: {what} is too large ({len(str(value)):,} digits)",
                         path) from None  # fmt: skip
    if not math.isfinite(x):
        raise InputError(f"line {n}: {what} must be finite", path)
    return x


def _tokens(value: object, n: int, what: str, path: str) -> int:
    x = _finite(value if not isinstance(value, str) else value.strip(), n, what, path)
    if x != int(x) or not 1 <= x <= MAX_TOKENS:
        raise InputError(
            f"line {n}: {what} must be a whole number of tokens from 1 to "
            f"{MAX_TOKENS:,}, got {str(value).strip()[:20]}",
            path,
        )
    return int(x)


def _number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False
