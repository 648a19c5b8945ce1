"""Evaluation data: many samples to measure accuracy on, from one .npz (N samples along
each batched input's sample axis, or the model's exact feed: one sample) or a folder of .npz
files, and optional labels (.npy of N class indices). Read without unpickling; cut into
batches of the run's batch size."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.errors import InputError
from engine.model.info import ModelInfo
from engine.model.inputs import Feeds, npz_headers
from engine.model.sample_axis import Axes, count_samples, step_of, take

MAX_SAMPLES = 4096  # beyond this, accuracy takes longer than it tells more


@dataclass(frozen=True)
class EvalData:
    batches: list[Feeds]
    samples: int
    labels: np.ndarray | None  # int64, one per sample, in batch order
    truncated: int = 0  # samples left out past MAX_SAMPLES
    axes: Axes = field(default_factory=dict)  # each input's sample axis (None: shared)


def npz_files(path: str | Path) -> list[Path]:
    """The file, or a folder's .npz files in name order."""
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.suffix == ".npz" and f.is_file())
        if not files:
            raise InputError("no .npz files in this folder", p)
        return files
    if not p.is_file():
        raise InputError("inputs file not found", p)
    return [p]


def read_eval_data(
    path: str | Path,
    load: Callable[[Path], Feeds],
    info: ModelInfo,
    batch: int,
    labels: str | Path | None = None,
) -> EvalData:
    """Every sample of `path` (a file or folder, each file read by `load`), in batches of
    the run's `batch` (a fixed-batch model's own) along each input's sample axis as the
    model's signature gives it (see engine/model/sample_axis); shared inputs go whole."""
    batches: list[Feeds] = []
    total = truncated = 0
    used: Axes | None = None
    for file in npz_files(path):
        feeds = load(file)
        check_finite(feeds, file)
        rows, axes = count_samples({k: a.shape for k, a in feeds.items()}, info, file)
        used = axes if used is None else used
        step = step_of(info, axes, batch) if rows > 1 else 1
        for start in range(0, rows, step):
            if total >= MAX_SAMPLES:
                truncated += min(step, rows - start)
                continue
            stop = start + min(step, rows - start, MAX_SAMPLES - total)
            batches.append({k: take(a, axes.get(k), start, stop) for k, a in feeds.items()})
            total += stop - start
    y = _labels(labels, total + truncated)[:total] if labels else None
    return EvalData(batches, total, y, truncated, used or {})


def check_finite(feeds: Feeds, file: Path) -> None:
    """Refuse NaN and infinities in a file's float inputs: they make NaN outputs of both
    models, which agree on nothing, and a check of them says nothing."""
    for name, arr in feeds.items():
        if arr.dtype.kind not in "fc" or arr.size == 0:
            continue
        bad = int(arr.size - np.count_nonzero(np.isfinite(arr)))
        if bad:
            nan = int(np.count_nonzero(np.isnan(arr)))
            what = "NaN" if nan == bad else "infinite" if not nan else "NaN or infinite"
            raise InputError(
                f"input {name!r} holds {bad:,} {what} values (of {arr.size:,}): give finite data",
                file,
            )


def _labels(path: str | Path, samples: int) -> np.ndarray:
    p = Path(path)
    if not p.is_file():
        raise InputError("labels file not found", p)
    try:
        y = np.load(p, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise InputError(f"not a readable .npy file ({exc})", p) from exc
    if not isinstance(y, np.ndarray) or y.dtype.kind not in "iu" or y.ndim != 1:
        raise InputError("labels must be a 1-D array of class indices (integers)", p)
    if y.size != samples:
        raise InputError(f"{y.size} labels for {samples} samples", p)
    return y.astype(np.int64)


def check_data_file(path: str | Path, info: ModelInfo) -> int:
    """Check a file (or folder) of samples for `info`'s inputs from the arrays' headers only
    (no data read, nothing unpickled): every input present with the model's rank, the same
    number of samples along each one's sample axis (or the model's exact feed). Returns
    the number of files; a bad one raises InputError naming the file and the cause."""
    files = npz_files(path)
    for file in files:
        try:
            headers = npz_headers(file)
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
            raise InputError(f"not a readable .npz file ({exc})", file) from exc
        missing = [v.name for v in info.inputs if v.name not in headers]
        if missing:
            raise InputError(
                f"no arrays for inputs {', '.join(missing)} "
                f"(the file has {', '.join(sorted(headers)) or 'none'})",
                file,
            )
        for v in info.inputs:
            shape = headers[v.name][0]
            if v.shape is not None and len(shape) != len(v.shape):
                raise InputError(
                    f"array {v.name!r} has shape {list(shape)}, the model wants {v.shape_text()}",
                    file,
                )
        count_samples({k: s for k, (s, _) in headers.items()}, info, file)
    return len(files)
