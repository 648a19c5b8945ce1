"""NaN inputs (issues 53/54): NaN or infinities in an evaluation or calibration file are
refused in one line naming the file and the input; NaN outputs fail the accuracy check,
never "cosine 1.000000". Before: NaN inputs made NaN outputs of FP32 and INT8 alike, whose
comparison over no finite value read as a perfect cosine and passed the INT8 check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.errors import InputError
from engine.measure.accuracy import compare_outputs
from engine.model.eval_data import read_eval_data
from engine.model.info import load_model
from engine.model.inputs import load_npz
from tests.conftest import DEMO_CNN

ROOT = Path(__file__).resolve().parents[1]


def _images(n: int) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((n, 3, 64, 64)).astype(np.float32)


@pytest.mark.parametrize(
    ("poison", "said"), [(np.nan, "2 NaN values"), (np.inf, "2 infinite values")]
)
def test_nan_or_inf_in_an_evaluation_file_is_one_line(
    tmp_path: Path, poison: float, said: str
) -> None:
    images = _images(4)
    images[1, 0, 0, :2] = poison
    path = tmp_path / "eval.npz"
    np.savez(path, image=images)
    _, info = load_model(DEMO_CNN)
    with pytest.raises(InputError) as caught:
        read_eval_data(path, lambda f: load_npz(f, info), info, 1)
    assert str(caught.value) == (
        f"{path}: input 'image' holds {said} (of {images.size:,}): give finite data"
    )


def test_finite_data_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "eval.npz"
    np.savez(path, image=_images(4))
    _, info = load_model(DEMO_CNN)
    assert read_eval_data(path, lambda f: load_npz(f, info), info, 2).samples == 4


def test_nan_outputs_of_both_models_fail_the_check() -> None:
    """NaN in, NaN out of FP32 and INT8 alike: no value to compare is no agreement."""
    nan = np.full((2, 10), np.nan, np.float32)
    result = compare_outputs(["logits"], [[nan]], [[nan.copy()]])
    assert result.cosine == 0.0
    assert not result.meets(0.99)
    assert result.per_output["logits"]["cosine"] == 0.0


def test_a_few_nan_outputs_in_both_fail_the_check() -> None:
    ref = np.random.default_rng(1).standard_normal((2, 10)).astype(np.float32)
    ref[0, 3] = np.nan
    result = compare_outputs(["logits"], [[ref]], [[ref.copy()]])
    assert result.cosine == 0.0 and result.nonfinite == 1


def test_identical_finite_outputs_still_pass() -> None:
    ref = np.random.default_rng(1).standard_normal((2, 10)).astype(np.float32)
    result = compare_outputs(["logits"], [[ref]], [[ref.copy()]])
    assert result.cosine == pytest.approx(1.0) and result.meets(0.99)


def test_calibration_file_with_nan_is_refused_by_bench(tmp_path: Path) -> None:
    cal = tmp_path / "cal.npz"
    images = _images(8)
    images[3] = np.nan
    np.savez(cal, image=images)
    proc = subprocess.run(
        [sys.executable, "-m", "app.entry", "bench", str(DEMO_CNN), "--precision",
         "int8-static", "--calibration", str(cal), "--duration", "0.2", "--no-live"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"opscope: error: {cal}: input 'image' holds {3 * 64 * 64:,} NaN values "
        f"(of {images.size:,}): give finite data"
    )
