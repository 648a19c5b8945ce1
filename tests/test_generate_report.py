"""Generation runs (kind `generate`) in the report and the trace: recorded for real with the
CLI on the demo LLM (FP32 with its phases profiled, then INT4 weights checked against
FP32), then a hostile copy whose texts an attacker rewrote. The report's numbers and the
trace's slices are checked against the stored passes, recomputed here with numpy."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.analysis import generation_trace
from engine.analysis.generation_trace import generation_trace_events
from engine.analysis.report import build_report
from engine.session.generation_rows import GenerationRun
from engine.session.reader import SessionReader
from engine.session.rows import RunRow
from tests.recorded_sessions import tampered_copy
from tests.session_material import op_rows_as_v4
from tests.test_cli import opscope
from tests.test_generate import DEMO_LLM

NEW_TOKENS = 6
EVIL_MODEL = "<script>alert(1)</script>"
EVIL_OP = "<img src=x onerror=alert(2)>"
EVIL_METHOD = "<iframe src=//evil>"
KIND_LABEL = 'generate <span class="small">(latency: a whole generation, end to end)</span>'


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Run 1: FP32 with --profile; run 2: INT4 weights (so with the accuracy figures)."""
    if not (DEMO_LLM / "genai_config.json").is_file():
        pytest.fail(f"{DEMO_LLM} is missing: the README's set-up builds it (make test)")
    session = tmp_path_factory.mktemp("gen") / "g.opscope"
    common = ["--prompt-len", "32", "--new-tokens", str(NEW_TOKENS), "--duration", "0.5",
              "--threads", "1", "--session", session]  # fmt: skip
    opscope("generate", DEMO_LLM, *common, "--profile", check=True)
    opscope("generate", DEMO_LLM, *common, "--precision", "int4", check=True)
    return session


@pytest.fixture(scope="module")
def hostile(recorded: Path) -> Path:
    """The same runs, with the model's name, an op type of the prefill and the accuracy's
    method rewritten by an attacker."""
    return tampered_copy(
        recorded,
        recorded.with_name("hostile.opscope"),
        [
            ("UPDATE models SET name = ?", (EVIL_MODEL,)),
            (
                "UPDATE generation SET summary = "
                "json_set(summary, '$.phases.prefill.op_types[0].op_type', ?) WHERE run_id = 1",
                (EVIL_OP,),
            ),
            (
                "UPDATE generation SET summary = json_set(summary, '$.accuracy.method', ?) "
                "WHERE run_id = 2",
                (EVIL_METHOD,),
            ),
        ],
    )


def _runs(path: Path) -> list[tuple[RunRow, GenerationRun, dict[str, Any]]]:
    with SessionReader.open(path) as reader:
        out = []
        for run in reader.runs():
            g = reader.generation(run.id)
            assert g is not None and g.summary is not None
            out.append((run, g, g.summary))
    return out


def _cells(*values: str) -> str:
    return "".join(f'<td class="r">{v}</td>' for v in values)


def _row(name: str, ns: np.ndarray) -> str:
    ms = ns.astype(np.float64) / 1e6
    p50, p90, p99 = np.percentile(ms, [50, 90, 99])
    return f"<tr><td>{name}</td>" + _cells(
        str(ms.size), f"{p50:.3f}", f"{p90:.3f}", f"{p99:.3f}", f"{ms.mean():.3f}",
        f"{ms.max():.3f}",
    )  # fmt: skip


def _block(page: str, run_id: int) -> str:
    """The HTML of one run in the Generation section."""
    section = page[page.index('<section id="generation">') :]
    section = section[: section.index("</section>")]
    start = section.index(f"<h3>Run {run_id}:")
    end = section.find("<h3>", start + 1)
    return section[start : end if end > 0 else None]


def test_the_report_shows_each_generation_run(hostile: Path) -> None:
    proc = opscope("report", hostile, check=True)
    page = hostile.with_suffix(".html").read_text(encoding="utf-8")
    assert "report:" in proc.stdout
    assert "<h2>Generation</h2>" in page and '<a href="#generation">Generation</a>' in page
    assert page.count(KIND_LABEL) == 2  # the runs table says what the latency is
    runs = _runs(hostile)
    assert [g.run_id for _, g, _ in runs] == [1, 2]
    for run, g, _ in runs:
        block = _block(page, run.id)
        n = g.ttft_ns.size
        assert n >= 3 and g.tpot_ns.size == n * (NEW_TOKENS - 1)
        assert n == run.samples  # one whole generation per latency sample
        # the counts and percentiles are those of the stored passes
        assert _row("TTFT", g.ttft_ns) in block and _row("TPOT", g.tpot_ns) in block
        assert f"{n} timed generations" in block
        decode = np.array([d.sum() for d in np.split(g.tpot_ns, n)]) / 1e6
        ttft = g.ttft_ns / 1e6
        share = ttft.mean() / (ttft.mean() + decode.mean())
        assert f"{ttft.mean():.3f} ms / {decode.mean():.3f} ms ({share:.1%} prefill)" in block
        assert f"{1 / (np.percentile(g.tpot_ns, 50) / 1e9):.1f} (batch / TPOT p50)" in block
        kv = g.kv_bytes_per_token * (32 + NEW_TOKENS)
        assert f"{kv / 1024:.1f} KB at the full length" in block
        assert block.count("<svg") == (3 if run.id == 1 else 2)  # time, split (, phases)
        assert EVIL_MODEL not in block and "&lt;script&gt;alert(1)&lt;/script&gt;" in block

    run1, run2 = _block(page, 1), _block(page, 2)
    phases = runs[0][2]["phases"]
    assert "ms per pass" in run1 and "ms per pass" not in run2  # only run 1 was profiled
    for name in ("prefill", "decode"):
        p = phases[name]
        row = f"<tr><td>{name}</td>" + _cells(
            str(p["passes"]), f"{p['time_ms']:.3f}", f"{p['flops'] / 1e9:.4f}",
            f"{p['bytes'] / 1e6:.2f}", f"{p['intensity']:.2f}",
        )  # fmt: skip
        assert row in run1, name
    assert phases["decode"]["intensity"] < phases["prefill"]["intensity"]
    acc = runs[1][2]["accuracy"]
    assert "against FP32" not in run1 and "against FP32" in run2
    assert f"{acc['token_agreement']:.1%} of {acc['positions']} positions" in run2
    cos = acc["logit_cosine"]
    assert f"{cos['mean']:.5f} / {cos['min']:.5f}" in run2
    for evil in (EVIL_MODEL, EVIL_OP, EVIL_METHOD):
        assert evil not in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in run1
    assert "&lt;iframe src=//evil&gt;" in run2


def test_the_trace_has_each_generation_with_its_passes(recorded: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    opscope("export", recorded, "--trace", out, check=True)
    data = json.loads(out.read_text())
    assert "generation_note" in data["otherData"] and "truncated" not in data["otherData"]
    for run, g, _ in _runs(recorded):
        slices = [e for e in data["traceEvents"] if e["pid"] == run.id and e["ph"] == "X"]
        assert {e["tid"] for e in slices} == {1}  # one track
        parents = [e for e in slices if e["cat"] == "generation"]
        prefill = [e for e in slices if e["name"] == "prefill"]
        decode = [e for e in slices if e["cat"] == "decode"]
        n = g.ttft_ns.size
        assert len(parents) == len(prefill) == n and len(decode) == n * (NEW_TOKENS - 1)
        per = Counter(e["args"]["generation"] for e in decode)
        assert per == dict.fromkeys(range(n), NEW_TOKENS - 1)
        assert [e["name"] for e in decode[: NEW_TOKENS - 1]] == [
            f"decode {k}" for k in range(1, NEW_TOKENS)
        ]
        # durations are the stored passes (µs, to the ns)
        assert [round(e["dur"] * 1e3) for e in prefill] == g.ttft_ns.tolist()
        assert [round(e["dur"] * 1e3) for e in decode] == g.tpot_ns.tolist()
        assert [round(e["ts"] * 1e3) for e in prefill] == g.starts_ns.tolist()
        for parent, first in zip(parents, prefill, strict=True):
            kids = [e for e in decode if e["args"]["generation"] == parent["args"]["generation"]]
            assert first["ts"] == parent["ts"]
            for a, b in zip([first, *kids], kids, strict=False):  # back to back, in order
                assert b["ts"] == pytest.approx(a["ts"] + a["dur"], abs=1e-3)
            end = kids[-1]["ts"] + kids[-1]["dur"]
            assert end == pytest.approx(parent["ts"] + parent["dur"], abs=1e-3)


def test_a_huge_run_is_cut_with_a_note(recorded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ((run, g, _), *_) = _runs(recorded)
    per = 2 + NEW_TOKENS - 1  # slices of one generation
    monkeypatch.setattr(generation_trace, "MAX_SLICES", 2 * per + 1)
    cut = generation_trace_events(run, g)
    assert len([e for e in cut.events if e["name"] == "prefill"]) == 2
    assert cut.notes == [
        f"run {run.id}: {g.ttft_ns.size} timed generations; the trace keeps the first 2 "
        f"({2 * per + 1} slices at most)"
    ]


def test_a_v3_file_still_reports(recorded: Path, tmp_path: Path) -> None:
    """A file from before generation runs (no generation or steps table) has no
    Generation section, and the rest of its report is there."""
    old = tmp_path / "v3.opscope"
    old.write_bytes(recorded.read_bytes())
    conn = sqlite3.connect(old)
    with conn:
        conn.execute("DROP TABLE steps")
        conn.execute("DROP TABLE generation")
        conn.execute("UPDATE runs SET kind = 'bench'")
        op_rows_as_v4(conn)
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    conn.close()
    with SessionReader.open(old) as reader:
        assert reader.version == 3 and reader.generation(1) is None
        page = build_report(reader, "v3")
    assert '<section id="generation">' not in page and "#generation" not in page
    assert "<h2>Runs</h2>" in page and "<h2>Latency</h2>" in page
    assert KIND_LABEL not in page and "<td>bench</td>" in page


def test_decode_steps_without_their_first_token_are_refused(recorded: Path) -> None:
    broken = tampered_copy(
        recorded,
        recorded.with_name("broken.opscope"),
        [("DELETE FROM steps WHERE run_id = 1 AND generation = 1 AND step = 0", ())],
    )
    proc = opscope("report", broken)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "generation 1 has decode steps but no first token" in proc.stderr
