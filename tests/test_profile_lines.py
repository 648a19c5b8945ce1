"""ONNX Runtime writes its profile one event per line; it is read a batch of lines at a time
(engine/measure/op_trace.py `events_by_line`): one json.loads of a 600,000-event profile (a
100,000-node chain's) held the GIL for tens of seconds, so `opscope profile` said nothing
and Ctrl-C waited (the probe fuzz, stop 61). Any other layout is parsed whole, as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import engine.measure.op_trace as op_trace
from engine.measure.op_trace import ProfileFormatError, events_by_line, parse_ort_profile
from tests.conftest import DEMO_CNN


def _ort_profile(tmp_path: Path) -> Path:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "p")
    sess = ort.InferenceSession(str(DEMO_CNN), options, providers=["CPUExecutionProvider"])
    i = sess.get_inputs()[0]
    x = np.zeros([d if isinstance(d, int) else 1 for d in i.shape], np.float32)
    for _ in range(3):
        sess.run(None, {i.name: x})
    return Path(sess.end_profiling())


def _events(n: int) -> list[dict[str, Any]]:
    run = {"cat": "Session", "name": "model_run", "ts": 0, "dur": n + 10, "ph": "X", "args": {}}
    nodes = [
        {"cat": "Node", "name": f"n{k}_kernel_time", "ts": k + 1, "dur": 1, "ph": "X",
         "args": {"op_name": "Relu", "provider": "CPUExecutionProvider"}}
        for k in range(n)
    ]  # fmt: skip
    return [run, *nodes]


def test_ort_s_own_profile_reads_line_by_line_as_it_parses_whole(tmp_path: Path) -> None:
    path = _ort_profile(tmp_path)
    with path.open() as fh:
        by_line = events_by_line(fh)
    assert by_line is not None and by_line == json.loads(path.read_text())
    assert parse_ort_profile(path).runs  # the command's own path reads it too


def test_a_long_profile_is_parsed_in_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = _events(3 * op_trace.PARSE_EVENTS)
    path = tmp_path / "long.json"
    path.write_text("[\n" + ",\n".join(json.dumps(e) for e in events) + "\n]\n")
    calls: list[int] = []
    real = json.loads

    def counted(text: str, **kw: Any) -> Any:
        calls.append(len(text))
        return real(text, **kw)

    monkeypatch.setattr(json, "loads", counted)  # the module op_trace parses with
    trace = parse_ort_profile(path)
    assert len(trace.nodes) == 3 * op_trace.PARSE_EVENTS
    assert len(calls) >= 3  # before: one call, the whole file, holding the GIL throughout


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('[\n{"cat": "Session",\n "name": "model_run", "ts": 0, "dur": 5}\n]', None),
        ('[{"cat": "Session", "name": "model_run", "ts": 0, "dur": 5}]', None),
        ('[\n{"cat": "Session", "name": "model_run", "ts": 0, "dur": 5},\n', "truncated"),
        ('[\n{"cat": "Session"},,\n{"cat": "Node"}\n]', "not JSON"),
    ],
)
def test_other_layouts_read_whole_with_their_errors(
    tmp_path: Path, text: str, said: str | None
) -> None:
    path = tmp_path / "p.json"
    path.write_text(text)
    if said is None:
        assert len(parse_ort_profile(path).runs) == 1
    else:
        with pytest.raises(ProfileFormatError, match=said):
            parse_ort_profile(path)
