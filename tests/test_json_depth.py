"""JSON from outside nested past the parser's depth is malformed input, one line, like any
other: a Mooncake trace line of 100,000 "[" ended `load --llm` and `simulate --llm` in a
RecursionError traceback (the probe fuzz), and another machine's answer could do the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import InputError
from engine.files import loads_json
from engine.remote.link import RemoteError, _answer
from engine.remote.target import Target
from engine.serve.traffic.trace_formats import read_any_trace

DEEP = "[" * 100_000 + "]" * 100_000


def test_deep_json_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        loads_json(DEEP)
    assert loads_json('{"a": [1]}') == {"a": [1]}


def test_a_trace_line_nested_too_deeply_is_one_line(tmp_path: Path) -> None:
    trace = tmp_path / "deep.jsonl"
    good = '{"timestamp": 0, "input_length": 10, "output_length": 5}\n'
    trace.write_text(good + DEEP + "\n")
    with pytest.raises(InputError, match="line 2: not a JSON object"):
        read_any_trace(str(trace))


def test_a_hosts_answer_nested_too_deeply_is_a_remote_error() -> None:
    with pytest.raises(RemoteError, match="not OpScope's"):
        _answer(Target.parse("gpu-box"), "[" * 5_000 + "]" * 5_000)
