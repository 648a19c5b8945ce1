"""`opscope info` on an export whose output size is a symbolic formula (issue 53: a YOLO
detector's output printed as a 500-character expression): the formula is named (N0) with
a note of what it is of; --verbose and --json keep it whole."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from engine.cli.main import main

FORMULA = " + ".join(
    f"(floor(floor(floor(height/{2**k} - 1/2)/2)/2) + 1)"
    f"*(floor(floor(floor(width/{2**k} - 1/2)/2)/2) + 1)"
    for k in range(1, 4)
)


@pytest.fixture
def model(tmp_path: Path) -> Path:
    g = h.make_graph(
        [h.make_node("Identity", ["images"], ["output0"])], "g",
        [h.make_tensor_value_info("images", T.FLOAT, ["batch", 22, FORMULA])],
        [h.make_tensor_value_info("output0", T.FLOAT, ["batch", 22, FORMULA])],
    )  # fmt: skip
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "det.onnx"
    onnx.save(m, str(path))
    return path


def test_a_long_symbolic_dim_is_named_with_a_note(
    model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["info", str(model)]) == 0
    out = capsys.readouterr().out
    assert FORMULA not in out
    assert "outputs    output0: float32[batch, 22, N0]\n" in out
    assert (
        f"N0 = a formula of height, width ({len(FORMULA):,} characters; "
        "--verbose or --json shows it)"
    ) in out
    assert max(len(line) for line in out.splitlines()) < 120


def test_verbose_and_json_keep_the_formula_whole(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_json = tmp_path / "info.json"
    assert main(["info", "--verbose", str(model), "--json", str(out_json)]) == 0
    assert f"float32[batch, 22, {FORMULA}]" in capsys.readouterr().out
    data = json.loads(out_json.read_text())
    assert data["outputs"][0]["shape"] == ["batch", 22, FORMULA]
