"""Reading a 50M-row LLM trace took about 9.5 GB (a row held as Python objects, about 200
bytes) before the simulation's memory check refused it. What a read will take is now
estimated from the file's size and its first chunk and refused in one line before the
read; the read packs rows into arrays as it goes. The machine's free memory is scaled by a
parameter or a monkeypatched figure, and the large file is sparse: nothing writes GBs."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest

from engine.errors import InputError
from engine.serve.traffic import trace_size
from engine.serve.traffic.trace_formats import read_any_trace
from tests.in_process import Cli

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def _azure_rows(n: int, start: int = 0) -> str:
    return "".join(
        f"2023-11-16 18:{(k // 60000) % 60:02d}:{(k // 1000) % 60:02d}.{k % 1000:03d}5900,"
        f"{100 + k % 900},{1 + k % 300}\n"
        for k in range(start, start + n)
    )


def test_a_trace_larger_than_the_free_memory_is_refused_before_it_is_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "azure.csv"
    path.write_text(HEADER + _azure_rows(40_000))
    size = trace_size.estimate(str(path), "azure")
    assert abs(size.rows - 40_001) <= 0.02 * 40_001  # the rows, from the first chunk's
    tracemalloc.start()
    try:
        with pytest.raises(InputError) as refused:
            read_any_trace(str(path), free_bytes=size.need_bytes // 2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    said = str(refused.value)
    assert "\n" not in said and said.startswith(f"{path}: about 40,")
    assert "more than the" in said and "of memory free" in said
    assert peak < 4 << 20, f"{peak / 1e6:.1f} MB to refuse it"  # its first chunk, no more
    assert len(read_any_trace(str(path), free_bytes=size.need_bytes * 2)) == 40_000


def test_an_llm_trace_read_holds_arrays_not_a_row_of_python_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """About 200 bytes a row before (50M rows: 9.5 GB); the estimate covers the peak. The
    chunk of rows held as Python objects is made small, so that a small file has many."""
    from engine.serve.traffic import trace_formats

    monkeypatch.setattr(trace_formats, "CHUNK_ROWS", 1024, raising=False)
    rows = 20_000
    path = tmp_path / "azure.csv"
    path.write_text(HEADER + _azure_rows(100))
    read_any_trace(str(path))  # once-only costs (imports, numpy's date parser) not counted
    path.write_text(HEADER + _azure_rows(rows))
    tracemalloc.start()
    try:
        trace = read_any_trace(str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(trace) == rows
    assert peak / rows < 120, f"{peak / rows:.0f} bytes a row at the peak"
    assert peak <= trace_size.estimate(str(path), "azure").need_bytes


def test_simulate_refuses_a_huge_trace_in_one_line_before_reading_it(
    tmp_path: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sparse 3 GB Azure trace (its first rows real): about 80 million requests. Before,
    the read began (and here met the file's hole as a line too long, after reading)."""
    from tests.conftest import DEMO_LLM

    path = tmp_path / "huge.csv"
    path.write_text(HEADER + _azure_rows(2_000))
    os.truncate(path, 3 << 30)
    monkeypatch.setattr(trace_size, "available_memory", lambda: 2 << 30)
    done = cli("simulate", DEMO_LLM, "--llm", "--traffic", f"trace:{path}", "--layout",
               "colocated")  # fmt: skip
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"opscope: error: {path}: about ")
    assert "requests (3.2 GB): reading them takes about" in line
    assert "more than the 2.1 GB of memory free" in line
