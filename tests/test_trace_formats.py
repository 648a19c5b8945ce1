"""Production traces (engine/serve/traffic/trace_formats.py): Azure LLM inference, BurstGPT and
Mooncake files, small ones written here in each format, detected from their first line;
a window of them replayed faster (`@speed=X,start=S`, --trace-speed, --trace-start); their
token counts driving LLM serving; and bad files refused in one line naming the line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.errors import ConfigError, InputError
from engine.serve.llm.study_plan import LLMPlan, plan_workload
from engine.serve.traffic.schedule import make_schedule, parse_traffic, with_trace_window
from engine.serve.traffic.trace_formats import read_any_trace, sniff

AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:15:51.2060990,879,55
2023-11-16 18:15:55.8002860,91,16
"""
BURST = """Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5,ChatGPT,472,18,490,Conversation log
45,ChatGPT,1087,3,1090,Conversation log
118,GPT-4,417,276,693,Conversation log
"""
MOON = """{"timestamp": 0, "input_length": 600, "output_length": 52, "hash_ids": [0, 1, 2]}
{"timestamp": 0, "input_length": 500, "output_length": 26, "hash_ids": [0, 1]}
{"timestamp": 3052, "input_length": 100, "output_length": 10, "hash_ids": [40]}
"""


def _write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_each_format_is_read_from_its_first_line(tmp_path: Path) -> None:
    azure = read_any_trace(_write(tmp_path, "a.csv", AZURE))
    assert azure.format == "azure" and len(azure) == 4
    assert azure.times == pytest.approx([0.0, 4.314579, 4.525509, 9.119696], abs=1e-6)
    assert list(azure.inputs) == [374, 396, 879, 91] and list(azure.outputs) == [44, 109, 55, 16]
    burst = read_any_trace(_write(tmp_path, "b.csv", BURST))
    assert burst.format == "burstgpt" and list(burst.times) == [0.0, 40.0, 113.0]
    assert list(burst.inputs) == [472, 1087, 417] and list(burst.outputs) == [18, 3, 276]
    moon = read_any_trace(_write(tmp_path, "m.jsonl", MOON))
    assert moon.format == "mooncake" and list(moon.times) == [0.0, 0.0, 3.052]
    assert moon.hash_ids == ((0, 1, 2), (0, 1), (40,))
    ours = read_any_trace(_write(tmp_path, "o.csv", "time,size\n1.0,3\n1.5,4\n"))
    assert ours.format == "csv" and list(ours.times) == [0.0, 0.5] and list(ours.inputs) == [3, 4]
    assert sniff(str(tmp_path / "m.jsonl")) == "mooncake"


@pytest.mark.parametrize(
    ("text", "fmt"),
    [(AZURE, "azure"), (BURST, "burstgpt"), (MOON, "mooncake"), ("time\n1\n2\n", "csv")],
)
def test_a_byte_order_mark_is_no_part_of_the_first_line(
    tmp_path: Path, text: str, fmt: str
) -> None:
    """Windows tools write UTF-8 with a BOM: a Mooncake file so written was refused as an
    'unknown trace format (first line '\\ufeff{...')' (the probe fuzz, stop 61)."""
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    plain = read_any_trace(_write(tmp_path, "plain.txt", text))
    marked = read_any_trace(str(path))
    assert marked.format == plain.format == fmt
    assert list(marked.times) == list(plain.times)


def test_a_window_replayed_faster(tmp_path: Path) -> None:
    path = _write(tmp_path, "b.csv", BURST)
    spec = parse_traffic(with_trace_window(f"trace:{path}", 2.0, 30.0))
    assert (spec.speed, spec.start_s, spec.path) == (2.0, 30.0, path)
    assert spec.describe() == f"trace:{path}@speed=2,start=30"
    s = make_schedule(spec, duration_s=100.0)
    # arrivals at 40 and 113 s: from 30 s, twice as fast -> 5 and 41.5 s
    assert list(s.times) == [5.0, 41.5] and list(s.sizes) == [1087, 417]
    assert list(s.outputs) == [3, 276] and s.format == "burstgpt"
    assert len(make_schedule(spec, duration_s=10.0)) == 1  # --duration is the window's length
    with pytest.raises(InputError, match="no request in the window"):
        make_schedule(parse_traffic(f"trace:{path}@start=500"), duration_s=10.0)
    with pytest.raises(ConfigError, match="trace:FILE traffic only"):
        with_trace_window("poisson:5", 2.0, None)
    with pytest.raises(ConfigError, match="speed must be above 0"):
        parse_traffic(f"trace:{path}@speed=0")


def test_the_tokens_drive_llm_serving_and_must_fit_the_context(tmp_path: Path) -> None:
    path = _write(tmp_path, "a.csv", AZURE)
    work = plan_workload(LLMPlan(traffic=f"trace:{path}", duration_s=60.0), 2048)
    assert list(work.prompt) == [374, 396, 879, 91] and list(work.output) == [44, 109, 55, 16]
    flags = plan_workload(LLMPlan(traffic=f"trace:{path}", duration_s=60.0, prompt_len="64"), 2048)
    assert set(flags.prompt) == {64} and set(flags.output) == {128}  # the flags win, both
    with pytest.raises(ConfigError, match=r"request 3 of trace .* \(prompt 879 \+ 55 new tokens\)"):
        plan_workload(LLMPlan(traffic=f"trace:{path}", duration_s=60.0), 900)


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("u.csv", "when,who\nyesterday,me\n", "unknown trace format"),
        (
            "back.csv",
            AZURE.replace("18:15:55.8002860", "18:15:40.0000000"),
            "line 5: time goes back",
        ),
        (
            "zero.csv",
            BURST.replace("1087,3,", "1087,0,"),
            "line 3: response tokens must be a whole number of tokens from 1",
        ),
        (
            "neg.jsonl",
            MOON.replace('"timestamp": 3052', '"timestamp": -5'),
            "line 3: time goes back",
        ),
        ("bad.jsonl", MOON + "not json\n", "line 4: not a JSON object"),
        ("nolen.jsonl", '{"timestamp": 1, "output_length": 3}\n', "line 1: no input_length"),
        (
            "hash.jsonl",
            '{"timestamp": 1, "input_length": 3, "output_length": 3, "hash_ids": "x"}\n',
            "line 1: hash_ids must be a list of integers",
        ),
        (
            "date.csv",
            AZURE.replace("2023-11-16 18:15:51.2060990", "soon"),
            "line 4: timestamp 'soon' is not a date",
        ),
    ],
)
def test_a_bad_trace_is_one_line_naming_the_line(
    tmp_path: Path, name: str, text: str, words: str
) -> None:
    path = _write(tmp_path, name, text)
    with pytest.raises(InputError) as err:
        read_any_trace(path)
    assert words in str(err.value) and "\n" not in str(err.value) and path in str(err.value)


def test_the_cli_replays_a_trace_window_and_refuses_a_bad_one(tmp_path: Path) -> None:
    from tests.conftest import ROOT

    llm = ROOT / "resources" / "models" / "demo_llm"
    if not (llm / "genai_config.json").is_file():
        pytest.skip("the demo LLM is built at set-up (make demo-llm)")
    path = _write(tmp_path, "a.csv", AZURE)
    cmd = [
        sys.executable,
        "-m",
        "engine.cli.main",
        "simulate",
        str(llm),
        "--traffic",
        f"trace:{path}",
        "--trace-speed",
        "2",
        "--layout",
        "colocated",
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert f"trace:{path}@speed=2: 4 requests; prompt trace 91-879 tokens" in p.stdout
    bad = _write(tmp_path, "z.csv", BURST.replace("472,18", "0,18"))
    p = subprocess.run([*cmd[:6], f"trace:{bad}"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "line 2: request tokens" in p.stderr
