"""Evaluation data: many samples (a file or a folder of .npz), labels, and the one-line
errors for data that cannot fit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from engine.errors import InputError
from engine.model.eval_data import MAX_SAMPLES, read_eval_data
from engine.model.info import load_model
from tests.conftest import DEMO_CNN
from tests.test_cli import opscope


def _images(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 3, 64, 64)).astype(np.float32)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """20 images in two files (12 + 8), labels = the FP32 model's own classes for the
    first 15 and a wrong class for the last 5 (so FP32 top-1 is 75%), and calibration."""
    root = tmp_path_factory.mktemp("eval")
    folder = root / "inputs"
    folder.mkdir()
    a, b = _images(12, 1), _images(8, 2)
    np.savez(folder / "a.npz", image=a)
    np.savez(folder / "b.npz", image=b)
    (folder / "notes.txt").write_text("not data")
    sess = ort.InferenceSession(str(DEMO_CNN), providers=["CPUExecutionProvider"])
    classes = sess.run(None, {"image": np.concatenate([a, b])})[0].argmax(1)
    labels = classes.copy()
    labels[15:] = (labels[15:] + 1) % 10
    np.save(root / "labels.npy", labels)
    np.save(root / "labels_short.npy", labels[:7])
    np.save(root / "labels_float.npy", labels.astype(np.float32))
    cal = root / "cal"
    cal.mkdir()
    np.savez(cal / "c.npz", image=_images(16, 3))
    np.savez(root / "empty.npz", image=np.zeros((0, 3, 64, 64), np.float32))
    return {"folder": folder, "labels": root / "labels.npy", "cal": cal, "root": root}


def test_samples_are_cut_into_batches_across_files(data: dict[str, Path]) -> None:
    def load(f: Path) -> dict[str, np.ndarray]:
        with np.load(f) as z:
            return {k: z[k] for k in z.files}

    _, info = load_model(DEMO_CNN)
    d = read_eval_data(data["folder"], load, info, 4, data["labels"])
    assert d.samples == 20 and [b["image"].shape[0] for b in d.batches] == [4, 4, 4, 4, 4]
    assert d.labels is not None and d.labels.size == 20 and d.truncated == 0
    with pytest.raises(InputError, match="7 labels for 20 samples"):
        read_eval_data(data["folder"], load, info, 4, data["root"] / "labels_short.npy")
    with pytest.raises(InputError, match="1-D array of class indices"):
        read_eval_data(data["folder"], load, info, 4, data["root"] / "labels_float.npy")
    with pytest.raises(InputError, match="no samples"):
        read_eval_data(data["root"] / "empty.npz", load, info, 4)
    (data["root"] / "nothing").mkdir(exist_ok=True)
    with pytest.raises(InputError, match=r"no \.npz files"):
        read_eval_data(data["root"] / "nothing", load, info, 4)
    assert MAX_SAMPLES >= 1024


def test_bench_measures_accuracy_on_every_sample_with_labels(
    data: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "r.json"
    proc = opscope("bench", DEMO_CNN, "--precision", "int8-static", "--batch", "4",
                   "--inputs", data["folder"], "--labels", data["labels"],
                   "--calibration", data["cal"], "--duration", "0.3", "--warmup", "3",
                   "--no-live", "--json", out, check=True)  # fmt: skip
    acc = json.loads(out.read_text())["accuracy"]
    assert acc["samples"] == 20  # 20 samples (in batches of 4): every one counted
    assert acc["baseline_label_top1"] == pytest.approx(0.75)
    assert acc["label_top1"] is not None and 0.5 <= acc["label_top1"] <= 0.9
    assert "accuracy on 20 samples with their labels from inputs" in proc.stderr
    assert "labels     top-1 accuracy" in proc.stdout and "FP32 75.00%" in proc.stdout


def test_labels_that_do_not_fit_are_one_line(data: dict[str, Path]) -> None:
    proc = opscope("bench", DEMO_CNN, "--precision", "int8-dynamic", "--inputs",
                   data["folder"], "--labels", data["root"] / "labels_short.npy",
                   "--duration", "0.2", "--no-live")  # fmt: skip
    assert proc.returncode == 2 and "labels_short.npy: 7 labels for 20 samples" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = opscope("bench", DEMO_CNN, "--inputs", data["root"] / "empty.npz", "--no-live")
    assert proc.returncode == 2 and "holds no samples" in proc.stderr


def test_a_data_file_is_checked_from_its_headers_in_one_line(tmp_path: Path) -> None:
    from engine.model.eval_data import check_data_file
    from engine.model.info import load_model
    from tests.conftest import DEMO_TRANSFORMER

    _, info = load_model(DEMO_TRANSFORMER)
    good = tmp_path / "cal.npz"
    np.savez(good, input_ids=np.ones((8, 32), np.int64))
    assert check_data_file(good, info) == 1
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, pixels=np.ones((2, 3), np.float32))
    with pytest.raises(InputError, match=r"wrong\.npz: no arrays for inputs input_ids"):
        check_data_file(wrong, info)
    rank = tmp_path / "rank.npz"
    np.savez(rank, input_ids=np.ones(5, np.int64))
    with pytest.raises(InputError, match="has shape \\[5\\], the model wants"):
        check_data_file(rank, info)
    junk = tmp_path / "junk.npz"
    junk.write_text("not a zip")
    with pytest.raises(InputError, match=r"junk\.npz: not a readable \.npz file"):
        check_data_file(junk, info)
