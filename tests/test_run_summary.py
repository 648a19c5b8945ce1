"""One processor from a recorded run to what the session table, the report, the export
and the compare line show: each renderer prints the same label and numbers."""

from __future__ import annotations

from pathlib import Path

from engine.analysis import run_table
from engine.analysis.export import run_label
from engine.analysis.run_summary import cell, summarize
from engine.cli.session_cmds import _cells
from engine.session.reader import SessionReader
from tests.session_material import record_demo_profile


def test_every_renderer_prints_the_summary(tmp_path: Path) -> None:
    path = tmp_path / "s.opscope"
    record_demo_profile(path)
    with SessionReader.open(path) as reader:
        run = reader.runs()[-1]
    s = summarize(run)
    assert s.config.startswith("FP32 fusion=all batch=1") and s.provider == "CPU"
    assert s.samples == run.samples and s.p50_ms == run.latency.p50  # type: ignore[union-attr]
    assert s.status == "ok" and s.started_at[4] == "-" and "T" not in s.started_at
    assert run_label(run) == s.label == f"run {s.id}: demo_cnn.onnx {s.config} (CPU)"
    row = dict(zip((c.name for c in run_table.BRIEF), _cells(run), strict=True))
    assert row["kind"] == "profile" and row["config"] == s.config
    assert row["p50 ms"] == cell(s.p50_ms) and row["inputs"] == s.inputs == "image 1x3x64x64"
    assert row["status"] == "ok" and row["host"] == run.host != "-"  # the machine it ran on
    assert cell(None) == cell(float("nan")) == "-" and cell(1.23456, 1) == "1.2"


def test_inputs_text_names_the_first_shapes() -> None:
    shapes = {"input_ids": [1, 256], "attention_mask": [1, 256], "token_type_ids": None}
    assert run_table.inputs_text(shapes) == "input_ids 1x256, attention_mask 1x256 +1"
    assert run_table.inputs_text({"x": None}, most=1) == "x ?" and run_table.inputs_text({}) == "-"
