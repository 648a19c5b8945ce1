"""A YOLO-style detector under INT8 (issue #50): one output holds boxes (0-320) and class
scores (0-1); static INT8 with one scale for it rounds every score to 0, and a whole-output
cosine (the boxes') called that "met". The head is kept in FP32, and the check judges the
scores on their own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent


class TinyYolo(torch.nn.Module):  # type: ignore[misc]
    def __init__(self, classes: int = 3) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, stride=2, padding=1),
            torch.nn.SiLU(),
            torch.nn.Conv2d(8, 16, 3, stride=2, padding=1),
            torch.nn.SiLU(),
        )
        self.box = torch.nn.Conv2d(16, 4, 1)
        self.cls = torch.nn.Conv2d(16, classes, 1)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        f = self.body(images)
        boxes = torch.sigmoid(self.box(f)).flatten(2) * 320.0  # [1, 4, anchors]
        scores = torch.sigmoid(self.cls(f) - 2.0).flatten(2)  # [1, classes, anchors]
        return torch.cat([boxes, scores], 1)


def _export(path: Path) -> None:
    torch.manual_seed(0)
    model = TinyYolo().eval()
    with warnings.catch_warnings():  # the TorchScript exporter says it is the legacy one
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(
            model, (torch.rand(1, 3, 64, 64),), str(path), input_names=["images"],
            output_names=["output0"], opset_version=17, dynamo=False,
        )  # fmt: skip


def _bench(model: Path, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`opscope bench MODEL --precision int8-static`, briefly, its JSON to `out`."""
    return subprocess.run(
        [sys.executable, "-m", "engine.cli.main", "bench", str(model), "--precision",
         "int8-static", "--duration", "0.2", "--min-runs", "5", "--warmup", "2", "--no-live",
         "--json", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=300, env=env,
    )  # fmt: skip


def test_static_int8_keeps_the_head_in_fp32_and_judges_scores_on_their_own(
    tmp_path: Path,
) -> None:
    model = tmp_path / "tiny_yolo.onnx"
    _export(model)
    out = tmp_path / "run.json"
    env = {k: v for k, v in os.environ.items() if k != "OPSCOPE_GENERATED_SAMPLES"}
    proc = _bench(model, out, env)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    int8 = data["variant"]
    assert int8["head_in_fp32"], "the head assembling boxes and scores stays in FP32"
    checks = {(c["part"], c["metric"]): c for c in data["accuracy"]["checks"]}
    assert ("channels 0-3", "cosine") in checks
    scores = next(c for (part, m), c in checks.items() if m == "cosine" and part.startswith(
        "channels 4"))  # fmt: skip
    assert scores["worst"] > 0.9, scores  # not collapsed to 0
    assert "head node(s) in FP32" in proc.stdout
    assert data["accuracy"]["data"].startswith("generated: 64 natural-statistics images")
    # the choice from the cache builds the same variant: the head in FP32 again
    again = _bench(model, out, env)
    assert "chosen earlier on this machine" in again.stderr + again.stdout
    cached = json.loads(out.read_text())
    assert cached["variant"]["path"] == data["variant"]["path"]
    assert cached["accuracy"]["cosine"] == data["accuracy"]["cosine"]


def test_an_int8_slower_than_fp32_is_said() -> None:
    from engine.backends.ort.int8_choice import slower_than_fp32

    slow = {"speedup_fp32": {"median": 0.5, "spread": [0.47, 0.52], "clock": "cpu"}}
    said = slower_than_fp32(slow)
    assert said is not None and "0.50x FP32" in said and "FP32 is faster" in said
    assert slower_than_fp32({"speedup_fp32": {"median": 0.98, "spread": [0.9, 1.05]}}) is None
    assert slower_than_fp32(None) is None
