"""Detections a variant keeps: a YOLO-style output ([batch, 4 + classes, anchors] or
[batch, anchors, 4 + classes]: centre x, centre y, width, height, then each class's score)
decoded the plain way (a score threshold, class-wise non-maximum suppression), and the
candidate's detections matched to FP32's by class and overlap.

Kept = 2 * matched / (FP32's + the candidate's): a detection lost and a detection invented
both count against it, and 1.0 means the same detections. None when neither found any."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

SCORE_MIN = 0.25  # ultralytics' default confidence
IOU_NMS = 0.45  # ... and its default NMS overlap
IOU_MATCH = 0.5  # a candidate's detection is FP32's when it overlaps this much, same class
MAX_DETECTIONS = 300
# a detection one side has and the other lacks is a near-tie, not counted, when the other
# side scored that anchor and class within this much of the threshold
TIE = 0.05
MIN_REFERENCE = 5  # FP32 detections over all samples below which detections are not judged


@dataclass(frozen=True)
class Kept:
    matched: int
    reference: int  # FP32's detections
    candidate: int
    ties: int = 0  # left out of both counts: the other side scored them at the threshold

    @property
    def share(self) -> float | None:
        total = self.reference + self.candidate
        return 2.0 * self.matched / total if total else None


def looks_like_detector(groups: Sequence[tuple[int, int]], values: Sequence[np.ndarray],
                        axis: int) -> bool:  # fmt: skip
    """Four box channels first, then scores within [0, 1]."""
    if not groups or groups[0] != (0, 4):
        return False
    for v in values:
        scores = np.take(np.asarray(v), np.arange(4, v.shape[axis]), axis=axis)
        if scores.size and (np.nanmin(scores) < -1e-4 or np.nanmax(scores) > 1 + 1e-4):
            return False
    return True


def decode(sample: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(boxes [k, 4] as x1 y1 x2 y2, class [k], score [k], anchor [k]) of one image's
    output (2-D, its channels along `axis`), after the threshold and class-wise NMS."""
    rows = _anchors(sample, axis)
    scores = np.nan_to_num(rows[:, 4:], nan=0.0)
    cls = scores.argmax(1)
    best = scores[np.arange(len(cls)), cls]
    keep = best >= SCORE_MIN
    cx, cy, w, h = (rows[keep, i] for i in range(4))
    boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1)
    cls, best, anchor = cls[keep], best[keep], np.flatnonzero(keep)
    chosen = _nms(boxes, best, cls)
    return boxes[chosen], cls[chosen], best[chosen], anchor[chosen]


def _anchors(sample: np.ndarray, axis: int) -> np.ndarray:
    rows = np.asarray(sample, dtype=np.float64)
    return rows.T if axis == 0 else rows  # -> [anchors, 4 + classes]


def _iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    x1 = np.maximum(box[0], others[:, 0])
    y1 = np.maximum(box[1], others[:, 1])
    x2 = np.minimum(box[2], others[:, 2])
    y2 = np.minimum(box[3], others[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    return np.asarray(inter / np.maximum(area + areas - inter, 1e-12))


def _nms(boxes: np.ndarray, scores: np.ndarray, cls: np.ndarray) -> list[int]:
    order = list(np.argsort(-scores, kind="stable"))
    chosen: list[int] = []
    while order and len(chosen) < MAX_DETECTIONS:
        i = order.pop(0)
        chosen.append(i)
        if not order:
            break
        rest = np.array(order)
        same = cls[rest] == cls[i]
        overlap = _iou(boxes[i], boxes[rest]) > IOU_NMS
        order = [j for j, drop in zip(order, same & overlap, strict=True) if not drop]
    return chosen


def kept(reference: np.ndarray, candidate: np.ndarray, axis: int) -> Kept:
    """FP32's detections against the candidate's, one image (2-D outputs). A detection
    only one side has, where the other side scored the same anchor and class within TIE of
    the threshold, is a near-tie: left out of both counts."""
    rb, rc, _, ra = decode(reference, axis)
    gb, gc, _, ga = decode(candidate, axis)
    free = np.ones(len(gb), dtype=bool)
    lost = np.ones(len(rb), dtype=bool)
    matched = 0
    for i, (box, c) in enumerate(zip(rb, rc, strict=True)):
        cand = np.flatnonzero(free & (gc == c))
        if not cand.size:
            continue
        iou = _iou(box, gb[cand])
        best = int(iou.argmax())
        if iou[best] >= IOU_MATCH:
            free[cand[best]] = False
            lost[i] = False
            matched += 1
    r_rows = np.nan_to_num(_anchors(reference, axis)[:, 4:])
    g_rows = np.nan_to_num(_anchors(candidate, axis)[:, 4:])
    near = SCORE_MIN - TIE
    tied_lost = int(sum(g_rows[a, c] >= near for a, c in zip(ra[lost], rc[lost], strict=True)))
    tied_new = int(sum(r_rows[a, c] >= near for a, c in zip(ga[free], gc[free], strict=True)))
    return Kept(matched, len(rb) - tied_lost, len(gb) - tied_new, tied_lost + tied_new)
