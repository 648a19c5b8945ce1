"""Reading a traffic trace: fast blocks with the same answer as row by row, every bad value
one line naming the file, the line and the cause, a long line refused before it is held,
a large read saying how far it got."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from engine.errors import InputError
from engine.serve.traffic import trace_file
from engine.serve.traffic.trace_file import read_trace


def write(tmp_path: Path, text: str, name: str = "t.csv") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("row", "said"),
    [
        ("0.2,-5", "line 4: size must be an integer from 1 to 2,147,483,647, got -5"),
        ("0.2,0", "line 4: size must be an integer from 1 to 2,147,483,647, got 0"),
        ("0.2,1e300", "line 4: size must be an integer from 1 to 2,147,483,647, got 1e300"),
        ("0.2,2.5", "line 4: size must be an integer"),
        ("0.2,nan", "line 4: size must be finite"),
        ("0.2,inf", "line 4: size must be finite"),
        ("0.2,abc", "line 4: size 'abc' is not a number"),
        ("0.2", "line 4: no size column"),
        ("nan,3", "line 4: time must be finite"),
        ("1e300,3", "line 4: time 1e+300 is past 1e+09 s"),
        ("0.05,3", "line 4: time 0.05 goes back in time"),
        ("x,3", "line 4: time 'x' is not a number"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_file_the_line_and_the_cause(
    tmp_path: Path, row: str, said: str
) -> None:
    path = write(tmp_path, f"time,size\n0,10\n0.1,20\n{row}\n0.3,10\n")
    with pytest.raises(InputError) as exc:
        read_trace(path)
    text = str(exc.value)
    assert text.startswith(path) and said in text and "\n" not in text


def test_blocks_read_as_rows_do_and_name_lines_across_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trace_file, "BLOCK", 1000)  # many blocks, lines cut at their edges
    rows = [f"{i * 0.01:.2f},{1 + i % 7}" for i in range(3000)]
    text = "# a comment\n\ntime,size\n" + "\n".join(rows) + "\n"
    times, keys, sizes = read_trace(write(tmp_path, text))
    assert keys is None and sizes is not None
    assert np.allclose(times, np.arange(3000) * 0.01)
    assert sizes.tolist() == [1 + i % 7 for i in range(3000)]
    rows[2500] = "25.00,-1"  # file line 2504
    with pytest.raises(InputError, match=r"line 2504: size must be an integer"):
        read_trace(write(tmp_path, "# a comment\n\ntime,size\n" + "\n".join(rows) + "\n"))


def test_keys_quotes_and_crlf(tmp_path: Path) -> None:
    text = 'time,key\r\n0,"a,b"\r\n0.5,c\r\n1,"a,b"\r\n'
    times, keys, sizes = read_trace(write(tmp_path, text))
    assert times.tolist() == [0.0, 0.5, 1.0] and sizes is None
    assert keys is not None and keys.tolist() == [0, 1, 0]


def test_a_long_line_is_refused_before_it_is_held(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One line of 1 GB took 2.1 GB; the bound here is scaled down with the block."""
    monkeypatch.setattr(trace_file, "BLOCK", 1 << 20)
    path = tmp_path / "long.csv"
    with path.open("wb") as fh:
        fh.write(b"time\n0\n")
        for _ in range(24):
            fh.write(b"1" * (1 << 20))  # a 24 MB line
        fh.write(b"\n0.5\n")
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match=r"line 3: longer than 65,536 characters"):
            read_trace(str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20  # a few blocks, never the line


def test_a_long_line_inside_a_block_is_named(tmp_path: Path) -> None:
    text = "time\n0\n" + "1" * 70_000 + "\n2\n"
    with pytest.raises(InputError, match=r"line 3: longer than 65,536 characters"):
        read_trace(write(tmp_path, text))


def test_too_many_rows_and_no_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace_file, "MAX_REQUESTS", 10)
    with pytest.raises(InputError, match=r"more than 10 requests"):
        read_trace(write(tmp_path, "time\n" + "0\n" * 11))
    with pytest.raises(InputError, match=r"the trace has no arrival times"):
        read_trace(write(tmp_path, "time\n# nothing\n", "empty.csv"))


def test_a_large_read_says_how_far_it_got(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(trace_file, "BLOCK", 1000)
    monkeypatch.setattr(trace_file, "PROGRESS_BYTES", 0)
    monkeypatch.setattr(trace_file, "PROGRESS_S", 0.0)
    path = write(tmp_path, "time\n" + "".join(f"{i}\n" for i in range(2000)))
    assert read_trace(path)[0].size == 2000
    err = capsys.readouterr().err
    assert f"reading trace {path}: " in err and "requests)" in err
