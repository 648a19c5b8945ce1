"""Which axis of each model input holds its samples (its batch axis), read from the model's
signature, and how a feed's arrays are counted, cut and cycled along those axes.

A stateful model's state is [layers, batch, hidden]: its samples lie along axis 1, not 0;
a scalar (a sample rate) or an input of fixed shape beside a batched one is shared by every
sample; a feed of exactly the model's input shapes is one sample however its arrays lead."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from engine.errors import InputError
from engine.model.info import Dim, ModelInfo
from engine.model.inputs import SEQ_WORDS, SPATIAL_WORDS, Feeds

Axes = dict[str, int | None]  # input name -> its sample axis (None: shared by every sample)

_BATCH_NAMES = ("n", "b", "bs", "nb")


def _is_batch_name(d: Dim) -> bool:
    if not isinstance(d, str):
        return False
    low = d.lower()
    return "batch" in low or low in _BATCH_NAMES


def _is_size_name(d: Dim) -> bool:
    """A dynamic dim named for a length or an image size: not where samples lie."""
    return isinstance(d, str) and any(w in d.lower() for w in (*SEQ_WORDS, *SPATIAL_WORDS))


def _axis_of(shape: tuple[Dim, ...]) -> int | None:
    named = [i for i, d in enumerate(shape) if _is_batch_name(d)]
    if named:
        return named[0]
    for i, d in enumerate(shape):
        if isinstance(d, int):
            if d == 1:  # a fixed batch of one leads: the dynamic dims after it are sizes
                return None
            continue
        return None if _is_size_name(d) else i
    return None


def sample_axes(info: ModelInfo) -> Axes:
    """Each input's sample axis: the dim named like a batch (batch, batch_size, N), else its
    first dynamic dim (symbolic or unknown) unless that one names a length or an image size;
    None for a scalar or an input with no such dim (shared). A model with no such dim
    anywhere (fixed shapes throughout) leads every input with its fixed batch: axis 0."""
    axes: Axes = {}
    for v in info.inputs:
        axes[v.name] = 0 if v.shape is None else _axis_of(v.shape)
    if all(a is None for a in axes.values()):
        axes = {v.name: 0 if v.shape is None or len(v.shape) else None for v in info.inputs}
    return axes


def matches_signature(shapes: Mapping[str, tuple[int, ...]], info: ModelInfo) -> bool:
    """Every input's array has the input's rank and its fixed dims: the model's exact feed."""
    for v in info.inputs:
        shape = shapes.get(v.name)
        if shape is None:
            return False
        if v.shape is None:
            continue
        if len(shape) != len(v.shape):
            return False
        if any(isinstance(d, int) and d != s for d, s in zip(v.shape, shape, strict=True)):
            return False
    return True


def count_samples(
    shapes: Mapping[str, tuple[int, ...]], info: ModelInfo, file: str | Path
) -> tuple[int, Axes]:
    """The number of samples in a feed of these array shapes and the axis each array is cut
    along (None: shared). Arrays that disagree along their sample axes are one sample when
    they are the model's exact feed (and no symbolic dim they share differs); otherwise one
    line names the file, the inputs and their axes."""
    axes = {k: a for k, a in sample_axes(info).items() if k in shapes}
    sizes = {k: shapes[k][a] for k, a in axes.items() if a is not None and len(shapes[k]) > a}
    if len(set(sizes.values())) > 1:
        if not _one_dim_differs(sizes, axes, info) and matches_signature(shapes, info):
            return 1, dict.fromkeys(axes)
        told = ", ".join(f"{k!r} {n} along axis {axes[k]}" for k, n in sizes.items())
        raise InputError(
            f"inputs disagree on the number of samples along their batch axes ({told}); "
            "give each input the same number of samples, or the model's exact input shapes "
            "for one sample",
            file,
        )
    rows = next(iter(sizes.values()), 1)
    if rows == 0:
        raise InputError("holds no samples (a batch of 0)", file)
    return int(rows), {k: a if k in sizes else None for k, a in axes.items()}


def _one_dim_differs(sizes: Mapping[str, int], axes: Axes, info: ModelInfo) -> bool:
    """Two inputs whose sample axes are one symbolic dim by name hold different sizes: the
    model itself says they are equal, so the feed truly disagrees."""
    seen: dict[str, int] = {}
    for v in info.inputs:
        a = axes.get(v.name)
        if v.name not in sizes or a is None or v.shape is None:
            continue
        d = v.shape[a]
        if isinstance(d, str) and seen.setdefault(d, sizes[v.name]) != sizes[v.name]:
            return True
    return False


def step_of(info: ModelInfo, axes: Axes, batch: int) -> int:
    """Samples per batch: the run's batch, or a fixed-batch model's own fixed batch."""
    for v in info.inputs:
        a = axes.get(v.name)
        if a is None or v.shape is None or a >= len(v.shape):
            continue
        d = v.shape[a]
        return max(1, d) if isinstance(d, int) else batch
    return batch


def take(arr: np.ndarray, axis: int | None, start: int, stop: int) -> np.ndarray:
    """Samples start..stop of `arr` along `axis` (a view); the whole array when shared."""
    if axis is None or arr.ndim <= axis:
        return arr
    return arr[(slice(None),) * axis + (slice(start, stop),)]


def fit_batch(feeds: Feeds, info: ModelInfo, batch: int, axes: Axes | None = None) -> Feeds:
    """Cycle or trim real data along each input's dynamic sample axis to `batch` samples
    (a fixed batch, or a shared input, stays as it is)."""
    axes = sample_axes(info) if axes is None else axes
    out: Feeds = {}
    for v in info.inputs:
        arr, a = feeds[v.name], axes.get(v.name)
        fixed = v.shape is not None and a is not None and isinstance(v.shape[a], int)
        if a is not None and not fixed and arr.ndim > a and arr.shape[a] != batch:
            arr = np.take(arr, np.arange(batch) % max(arr.shape[a], 1), axis=a)
        out[v.name] = arr
    return out


def batch_of(feeds: Mapping[str, np.ndarray], axes: Axes | None = None) -> int:
    """Samples per inference: the size along the first input's sample axis (without axes,
    the leading dim of the first input); 1 for a feed with no sample axis."""
    if axes is None:
        for arr in feeds.values():
            return int(arr.shape[0]) if arr.ndim else 1
        return 1
    for k, arr in feeds.items():
        a = axes.get(k)
        if a is not None and arr.ndim > a:
            return int(arr.shape[a])
    return 1
