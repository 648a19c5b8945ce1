"""How one output is judged, from what its shape and values say it is: split into samples
(its rows, padding left out where an attention mask says so), into channel groups where
its channels mix scales (a detector's box coordinates, 0-640, beside class scores, 0-1:
a whole-output cosine is the boxes' alone), and read as class probabilities per position
(an OCR recognizer's [batch, time, classes] softmax) where its rows sum to one.

Numpy only; the thresholds are named and explained where they are set."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SCALE_GAP = 10.0  # channel groups: every channel of one at least this many times the other's
MAX_CHANNELS = 1024  # a channel axis is short...
LONG_AXIS = 4  # ...beside an axis this many times longer (a detector's anchors)
MIN_ANCHORS = 100  # and that long axis holds at least this many (not a short text's tokens)
MAX_GROUPS = 4
# A changed arg-max counts when FP32 itself scored its answer above the candidate's pick by
# more than this share of the row's score range: closer than that, FP32 was at a tie
TIE_SHARE = 0.01


def split_samples(value: np.ndarray, rows: int | None, mask: np.ndarray | None) -> list[np.ndarray]:
    """One flat vector per sample: `value` cut along axis 0 when it has `rows` rows (the
    batch's samples), else the whole of it is one sample. With `mask` ([rows, length] of
    0/1, the model's attention mask) and an output shaped [rows, length, ...], positions
    the mask marks as padding are left out: what a model writes there is never read."""
    v = np.asarray(value, dtype=np.float64)
    if not rows or v.ndim == 0 or v.shape[0] != rows:
        return [v.ravel()]
    out = []
    for i in range(rows):
        row = v[i]
        if mask is not None and row.ndim >= 1 and mask.shape == v.shape[:2]:
            row = row[np.asarray(mask[i]).astype(bool)]
        out.append(row.ravel())
    return out


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity over the values finite in both (two zero vectors: 1; one: 0)."""
    finite = np.isfinite(a) & np.isfinite(b)
    a, b = a[finite], b[finite]
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.clip(np.dot(a, b) / (na * nb), -1.0, 1.0))


def channel_axis(shapes: Sequence[tuple[int, ...]]) -> int | None:
    """The channel axis of outputs shaped [batch, channels, anchors] or [batch, anchors,
    channels]: the short one beside one at least LONG_AXIS times longer; None otherwise."""
    if not shapes or any(len(s) != 3 for s in shapes):
        return None
    a, b = shapes[0][1], shapes[0][2]
    if any(s[1] != a or s[2] != b for s in shapes):
        return None
    if 1 < a <= MAX_CHANNELS and b >= max(LONG_AXIS * a, MIN_ANCHORS):
        return 1
    if 1 < b <= MAX_CHANNELS and a >= max(LONG_AXIS * b, MIN_ANCHORS):
        return 2
    return None


def channel_groups(values: Sequence[np.ndarray]) -> tuple[int, list[tuple[int, int]]] | None:
    """(channel axis, [(first, end) ...]) when the reference output's channels fall into
    contiguous runs whose scales are SCALE_GAP apart (every channel of one run against every
    channel of the next); None when it is one scale. The scale of a channel is its largest
    magnitude over every sample and anchor."""
    axis = channel_axis([tuple(v.shape) for v in values])
    if axis is None:
        return None
    other = tuple(i for i in range(3) if i != axis)
    scale = np.max(np.stack([np.nanmax(np.abs(v), axis=other) for v in values]), axis=0)
    groups = _split(np.asarray(scale, dtype=np.float64), 0, len(scale))
    return (axis, groups) if len(groups) > 1 else None


def _split(scale: np.ndarray, lo: int, hi: int, depth: int = 1) -> list[tuple[int, int]]:
    """Split [lo, hi) at the boundary that separates scales by SCALE_GAP, recursively."""
    if depth >= MAX_GROUPS or hi - lo < 2:
        return [(lo, hi)]
    for k in range(lo + 1, hi):
        left, right = scale[lo:k], scale[k:hi]
        big, small = (left, right) if left.min() >= right.max() else (right, left)
        floor = max(float(small.max()), 1e-12)
        if float(big.min()) >= SCALE_GAP * floor:
            return _split(scale, lo, k, depth + 1) + _split(scale, k, hi, depth + 1)
    return [(lo, hi)]


def take_channels(value: np.ndarray, axis: int, first: int, end: int) -> np.ndarray:
    return np.take(np.asarray(value), np.arange(first, end), axis=axis)


def is_probabilities(values: Sequence[np.ndarray]) -> bool:
    """Rows of class probabilities along the last axis ([batch, classes] or [batch, time,
    classes]): every value within [0, 1] and every row summing to 1 (a softmax)."""
    for v in values:
        v = np.asarray(v)
        if v.ndim not in (2, 3) or v.shape[-1] < 2 or v.dtype.kind != "f" or not v.size:
            return False
        if not np.isfinite(v).all() or v.min() < -1e-4 or v.max() > 1 + 1e-4:
            return False
        if not np.allclose(v.sum(-1), 1.0, atol=1e-2):
            return False
    return True


def argmax_agreement(
    refs: Sequence[np.ndarray], gots: Sequence[np.ndarray]
) -> tuple[int, int, list[float], int]:
    """(agreeing, total, per-sample share, ties) of the arg-max over the last axis: a class
    per sample ([batch, classes]) or per position ([batch, time, classes]). A candidate's
    row with a NaN agrees with nothing; a changed answer where FP32's own scores for the
    two classes lie within TIE_SHARE of its row's range is a tie (`ties`), not counted
    against the candidate."""
    agree = total = ties = 0
    per_sample: list[float] = []
    for r, g in zip(refs, gots, strict=True):
        r, g = np.asarray(r, dtype=np.float64), np.asarray(g)
        mine, theirs = r.argmax(-1), g.argmax(-1)
        same = (mine == theirs) & np.isfinite(g).all(-1)
        top = np.take_along_axis(r, mine[..., None], -1)[..., 0]
        at_theirs = np.take_along_axis(r, theirs[..., None], -1)[..., 0]
        spread = r.max(-1) - r.min(-1)
        tie = ~same & np.isfinite(g).all(-1) & (top - at_theirs <= TIE_SHARE * spread)
        ties += int(tie.sum())
        same |= tie
        agree += int(same.sum())
        total += int(same.size)
        per_sample.extend(float(s) for s in same.reshape(same.shape[0], -1).mean(1))
    return agree, total, per_sample, ties
