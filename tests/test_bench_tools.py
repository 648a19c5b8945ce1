"""The soak and session-growth benchmarks' own parts (bench/rss.py, which they share):
the RSS slope fit, the smaps diff, and the generated ~325-node model (run by ONNX Runtime)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "bench" / "models"))

import deep_encoder  # noqa: E402
import rss as bench_rss  # noqa: E402


def test_the_slope_is_fitted_from_the_skip_on() -> None:
    t = np.arange(0, 600, 5.0)
    rss = np.where(t < 120, 100 + t, 300 + 0.5 * t / 60)  # start-up, then 0.5 MB/min
    assert bench_rss.slope_mb_per_min(t, rss, 120) == pytest.approx(0.5)
    assert np.isnan(bench_rss.slope_mb_per_min(t, rss, 10_000))


def test_smaps_growth_ranks_the_mappings_that_grew() -> None:
    lines = bench_rss.smaps_growth({"[heap]": 10, "a": 5_000_000}, {"[heap]": 3_000_010, "b": 1})
    assert lines[0].endswith("a") and "-5.00 MB" in lines[0]
    assert lines[1].endswith("[heap]") and "+3.00 MB" in lines[1]


def test_the_deep_encoder_has_13_nodes_a_layer_and_runs(tmp_path: Path) -> None:
    import onnx
    import onnxruntime as ort

    path = deep_encoder.build(tmp_path / "deep.onnx", layers=3)
    assert len(onnx.load(str(path)).graph.node) == 39
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((1, deep_encoder.SEQ, deep_encoder.D))
    (y,) = sess.run(None, {"x": x.astype(np.float32)})
    assert y.shape == x.shape and np.isfinite(y).all()
