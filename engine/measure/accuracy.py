"""Compare a variant's outputs with the FP32 model's on the same inputs."""

from __future__ import annotations

import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ACCURACY_BATCHES = 4  # generated input batches compared (1 when the inputs are real data)


@dataclass(frozen=True, slots=True)
class AccuracyResult:
    """This variant's outputs against the FP32 model's on the same inputs."""

    baseline: str
    max_abs_err: float
    mean_abs_err: float
    cosine: float
    top1_agreement: float | None
    samples: int
    per_output: dict[str, dict[str, float | None]] = field(default_factory=dict)
    label_top1: float | None = None  # top-1 accuracy against the labels given
    baseline_label_top1: float | None = None  # the FP32 model's, on the same samples
    nonfinite: int = 0  # values NaN or infinite where FP32's are finite (or the reverse)

    def to_json(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "max_abs_err": self.max_abs_err,
            "mean_abs_err": self.mean_abs_err,
            "cosine": self.cosine,
            "top1_agreement": self.top1_agreement,
            "samples": self.samples,
            "per_output": self.per_output,
            "label_top1": self.label_top1,
            "baseline_label_top1": self.baseline_label_top1,
            "nonfinite": self.nonfinite,
        }


def flatten_output(value: Any) -> np.ndarray | None:
    """A numeric vector from any ORT output: tensors, sequences of tensors, maps, lists
    of maps (ZipMap). Map values are taken in key order. None when nothing numeric."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biuf":
            return value.astype(np.float64).ravel()
        return None
    if isinstance(value, dict):
        parts = [flatten_output(value[k]) for k in sorted(value, key=str)]
        return _concat(parts)
    if isinstance(value, list | tuple):
        return _concat([flatten_output(v) for v in value])
    if isinstance(value, int | float | np.generic):
        return np.array([float(value)])
    return None


def _concat(parts: Sequence[np.ndarray | None]) -> np.ndarray | None:
    kept = [p for p in parts if p is not None]
    return np.concatenate(kept) if kept else None


# Outputs shaped [batch, n] that are vectors, not class scores: top-1 means nothing there.
NOT_SCORES = re.compile(r"embed|pool|hidden|feature|encod|vector|state", re.IGNORECASE)


def _looks_like_scores(value: Any, name: str = "", vectors: AbstractSet[str] = frozenset()) -> bool:
    """Class scores ([batch, classes], float), so top-1 agreement means something; a
    sentence embedding of the same shape is known by its name, or by the graph making it
    by pooling or normalizing (`vectors`, from the model's description)."""
    return (
        isinstance(value, np.ndarray)
        and value.dtype.kind == "f"
        and value.ndim == 2
        and value.shape[1] > 1
        and not NOT_SCORES.search(name)
        and name not in vectors
    )


def compare_outputs(
    names: Sequence[str],
    baseline: Sequence[Sequence[Any]],
    candidate: Sequence[Sequence[Any]],
    labels: np.ndarray | None = None,
    vectors: AbstractSet[str] = frozenset(),
) -> AccuracyResult:
    """`baseline[i][j]` is output j for input batch i. Errors are over all batches. With
    `labels` (one class index per sample, in batch order), top-1 accuracy of both models
    on the first output shaped like class scores. `vectors`: outputs known not to be."""
    per_output: dict[str, dict[str, float | None]] = {}
    all_ref: list[np.ndarray] = []
    all_got: list[np.ndarray] = []
    agree = total = nonfinite = 0
    for j, name in enumerate(names):
        refs = [flatten_output(b[j]) for b in baseline]
        gots = [flatten_output(c[j]) for c in candidate]
        ref = _concat(refs)
        got = _concat(gots)
        if ref is None or got is None or ref.size != got.size:
            per_output[name] = {
                "max_abs_err": None,
                "mean_abs_err": None,
                "cosine": None,
                "top1_agreement": None,
            }
            continue
        out_agree = out_total = 0
        for b, c in zip(baseline, candidate, strict=True):
            if _looks_like_scores(b[j], name, vectors) and _looks_like_scores(c[j], name, vectors):
                finite = np.isfinite(c[j]).all(1)  # a row with NaN chose nothing
                out_agree += int(((b[j].argmax(1) == c[j].argmax(1)) & finite).sum())
                out_total += b[j].shape[0]
        agree += out_agree
        total += out_total
        diff = np.abs(ref - got)
        # a value that is not finite where FP32's is fails the check: counted, not dropped
        bad = int(np.count_nonzero(np.isfinite(ref) != np.isfinite(got)))
        nonfinite += bad
        per_output[name] = {
            "max_abs_err": float(diff.max()) if diff.size else 0.0,
            "mean_abs_err": float(diff.mean()) if diff.size else 0.0,
            "cosine": 0.0 if bad else _cosine(ref, got),
            "top1_agreement": out_agree / out_total if out_total else None,
            "nonfinite": float(bad),
        }
        all_ref.append(ref)
        all_got.append(got)
    if all_ref:
        ref = np.concatenate(all_ref)
        got = np.concatenate(all_got)
        diff = np.abs(ref - got)
        max_err = float(diff.max()) if diff.size else 0.0
        mean_err = float(diff.mean()) if diff.size else 0.0
        # the headline is the worst output: a good logits output must not hide a broken
        # embedding output concatenated with it
        cos = min(float(v["cosine"]) for v in per_output.values() if v["cosine"] is not None)
    else:
        max_err = mean_err = cos = float("nan")
    label_top1 = base_top1 = None
    if labels is not None:
        base_top1, label_top1 = _label_accuracy(names, baseline, candidate, labels, vectors)
    return AccuracyResult(
        baseline="fp32",
        max_abs_err=max_err,
        mean_abs_err=mean_err,
        cosine=cos,
        top1_agreement=agree / total if total else None,
        samples=len(baseline),
        per_output=per_output,
        label_top1=label_top1,
        baseline_label_top1=base_top1,
        nonfinite=nonfinite,
    )


def _label_accuracy(
    names: Sequence[str],
    baseline: Sequence[Sequence[Any]],
    candidate: Sequence[Sequence[Any]],
    labels: np.ndarray,
    vectors: AbstractSet[str],
) -> tuple[float | None, float | None]:
    """(FP32, candidate) top-1 accuracy against `labels` on the first score-like output."""
    for j, name in enumerate(names):
        if not all(_looks_like_scores(b[j], name, vectors) for b in baseline):
            continue
        ref = np.concatenate([np.asarray(b[j]).argmax(1) for b in baseline])
        got = np.concatenate([np.asarray(c[j]).argmax(1) for c in candidate])
        if ref.size != labels.size:
            return None, None
        return float((ref == labels).mean()), float((got == labels).mean())
    return None, None


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    finite = np.isfinite(a) & np.isfinite(b)
    a, b = a[finite], b[finite]
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))
