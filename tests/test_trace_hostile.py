"""Hostile LLM traces (issues 53, 54): a Mooncake timestamp past what a float holds, a
JSON `true` where a count belongs, Azure timestamps given as epoch numbers, and traces
whose first N requests lie centuries apart, which a load run (real time) must never wait
for past --duration."""

from __future__ import annotations

import json
import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from engine.errors import ConfigError, InputError, OpScopeError
from engine.run.serving_jobs import LoadRunRequest, load_schedule
from engine.serve.batching import BatchPolicy
from engine.serve.loop import ServingLoop
from engine.serve.traffic.schedule import Schedule
from engine.serve.traffic.trace_file import BLOCK
from engine.serve.traffic.trace_formats import read_any_trace
from tests.conftest import DEMO_LLM
from tests.test_cli import opscope

CENTURY_S = 100 * 365.25 * 86400


def _write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def _moon(**row: object) -> str:
    base: dict[str, object] = {"timestamp": 0, "input_length": 10, "output_length": 5}
    return json.dumps({**base, **row}) + "\n"


def test_a_mooncake_timestamp_too_large_for_a_float_is_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "big.jsonl", _moon() + '{"timestamp": 1' + "0" * 400
                  + ', "input_length": 10, "output_length": 5}\n')  # fmt: skip
    with pytest.raises(InputError, match="line 2: timestamp is too large"):
        read_any_trace(path)


@pytest.mark.parametrize("field", ["input_length", "output_length", "timestamp"])
def test_a_mooncake_boolean_is_not_a_count(tmp_path: Path, field: str) -> None:
    path = _write(tmp_path, "bool.jsonl", _moon() + _moon(**{field: True}))
    with pytest.raises(InputError, match=f"line 2: {field} true is not a number"):
        read_any_trace(path)


@pytest.mark.parametrize(("scale", "unit"), [(1, "s"), (1e3, "ms"), (1e6, "us"), (1e9, "ns")])
def test_azure_epoch_timestamps_keep_their_gaps(tmp_path: Path, scale: float, unit: str) -> None:
    """1-s gaps as epoch numbers (numpy had read 1700000000 as a year: 366 days apart)."""
    rows = "".join(f"{int((1_700_000_000 + k) * scale)},100,10\n" for k in range(4))
    path = _write(tmp_path, f"azure_{unit}.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n" + rows)
    trace = read_any_trace(path)
    assert trace.format == "azure"
    np.testing.assert_allclose(trace.times, [0.0, 1.0, 2.0, 3.0])


def test_azure_numbers_and_dates_mixed_are_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "mixed.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                  "1700000000,100,10\n2023-11-16 18:15:46,100,10\n")  # fmt: skip
    with pytest.raises(InputError, match=r"line 3: timestamp .* is not a number"):
        read_any_trace(path)


def _century_trace(tmp_path: Path) -> str:
    """Three requests: at 0 s, 1 s, and a hundred years on (Azure dates)."""
    return _write(tmp_path, "century.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                  "1923-11-16 18:15:46,100,10\n1923-11-16 18:15:47,100,10\n"
                  "2023-11-16 18:15:46,100,10\n")  # fmt: skip


def test_load_first_n_requests_are_cut_at_the_duration(tmp_path: Path) -> None:
    """`load --requests 3 --duration 5` on a trace whose third request is a century on:
    the two due within 5 s are served, said in one line (it waited for the century)."""
    path = _century_trace(tmp_path)
    req = LoadRunRequest(traffic=f"trace:{path}", batching={}, duration_s=5.0, requests=3)
    _, schedule = load_schedule(req)
    assert len(schedule) == 2 and float(schedule.times[-1]) == pytest.approx(1.0)
    assert "past --duration 5 s: serving the 2 due within it" in schedule.note
    assert "100 years" in schedule.note and "\n" not in schedule.note


def test_load_on_a_slow_rate_never_plans_past_the_duration() -> None:
    """poisson at one request a day, first 5 requests: they lie days apart."""
    req = LoadRunRequest(traffic="constant:0.00001", batching={}, duration_s=3.0, requests=5)
    _, schedule = load_schedule(req)
    assert len(schedule) == 1 and "past --duration 3 s" in schedule.note


def test_load_refuses_a_window_with_nothing_due_within_the_duration(tmp_path: Path) -> None:
    path = _century_trace(tmp_path)
    req = LoadRunRequest(traffic=f"trace:{path}@start=2", batching={}, duration_s=5.0,
                         requests=1)  # fmt: skip
    with pytest.raises(ConfigError, match=r"the first request is due .* past --duration 5 s"):
        load_schedule(req)


FEEDS = {"x": np.zeros((1, 4), np.float32)}


def test_a_gap_past_what_a_timed_wait_takes_is_waited_not_fatal() -> None:
    """The next arrival 10^10 s away: the traffic thread died with OverflowError (a timed
    wait's limit) and the run ended as if served. Now it waits, stoppably, until the
    run's deadline says so."""
    schedule = Schedule(np.array([0.0, 1e10]), np.arange(2, dtype=np.int64))
    loop = ServingLoop(lambda f: None, lambda k: FEEDS, schedule, BatchPolicy(), deadline_s=0.6,
                       report_s=0.1)  # fmt: skip
    list(loop.run())
    assert loop.error is None and loop.timed_out
    assert len(loop.records()) == 1  # the one sent; the other, never due, dropped


class _BrokenSender(ServingLoop):
    def _send(self) -> None:
        raise OverflowError("timeout value is too large")


def test_a_dead_traffic_thread_is_the_runs_error() -> None:
    schedule = Schedule(np.array([0.0, 0.1]), np.arange(2, dtype=np.int64))
    loop = _BrokenSender(lambda f: None, lambda k: FEEDS, schedule, BatchPolicy(), report_s=0.05)
    with pytest.raises(OpScopeError, match=r"the traffic generator stopped .*OverflowError"):
        list(loop.run())


def test_load_llm_serves_what_is_due_within_the_duration(tmp_path: Path) -> None:
    """`load --llm` on the century trace, first 3 requests: it waited for the third (a
    hundred years); now it serves the two due within --duration and says so."""
    if not (DEMO_LLM / "model.onnx").is_file():
        pytest.skip("the demo LLM is built at set-up")
    out = tmp_path / "r.json"
    r = opscope("load", str(DEMO_LLM), "--llm", "--traffic", f"trace:{_century_trace(tmp_path)}",
                "--requests", "3", "--duration", "3", "--json", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "100 years, past --duration 3 s: serving the 2 due within it" in r.stderr
    assert json.loads(out.read_text())["traffic"]["requests"] == 2


@pytest.mark.parametrize(
    "head",
    ["", "TIMESTAMP,ContextTokens,GeneratedTokens\n",
     "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n",
     _moon(), "time,size\n0,1\n"],
    ids=["first line", "azure", "burstgpt", "mooncake", "csv"],
)  # fmt: skip
def test_a_huge_line_is_refused_while_read_in_bounded_memory(tmp_path: Path, head: str) -> None:
    """A 64 MB line (a sparse file: no disk taken) in each format: refused naming its line,
    with Python memory bounded by the read's block, whatever the line's length (a 1 GB
    line took 2.1 GB to be refused)."""
    path = tmp_path / "huge.trace"
    path.write_text(head)
    with path.open("r+b") as fh:
        fh.truncate(len(head.encode()) + (64 << 20))  # NUL bytes, no newline
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match="longer than"):
            read_any_trace(str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * BLOCK, f"{peak / 1e6:.0f} MB to refuse it"


@pytest.mark.parametrize("fmt", ["mooncake", "azure"])
def test_a_long_llm_trace_read_says_how_far_it_got(
    tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ten-million-row trace was read for minutes without a word: rows read, on stderr."""
    from engine.serve.traffic import trace_formats

    monkeypatch.setattr(trace_formats, "PROGRESS_S", 0.0)
    rows = trace_formats.PROGRESS_ROWS + 10
    if fmt == "mooncake":
        text = "".join(_moon(timestamp=k) for k in range(rows))
    else:
        text = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
            f"{1_700_000_000 + k},100,10\n" for k in range(rows)
        )
    trace = read_any_trace(_write(tmp_path, f"long.{fmt}", text))
    assert len(trace) == rows
    said = capsys.readouterr().err
    # against the rows its size suggested before the read (its first chunk: all of it here)
    assert f"{trace_formats.PROGRESS_ROWS:,} requests of about " in said
    assert re.search(r"of about [\d,]+ \((99|100)%\) so far", said), said
