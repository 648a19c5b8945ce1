"""The INT8 peers benchmark's sessions and accuracy metrics (bench/int8_peers.py): cosine,
detections matched by IoU after NMS, CTC-decoded strings, and whether a recipe holds its target."""

from __future__ import annotations

from pathlib import Path

import numpy as np

TARGET = 0.99
SCORE_T, NMS_IOU, MATCH_IOU = 0.25, 0.45, 0.5
MIN_FP32_DETS = 5


def session(path: Path, threads: int):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def cos(a: np.ndarray, b: np.ndarray) -> float:
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 and nb == 0:
        return 1.0
    if na == 0 or nb == 0 or not np.isfinite(na) or not np.isfinite(nb):
        return 0.0
    return float(a @ b / (na * nb))


def run_all(sess, data: dict, n: int) -> list[list[np.ndarray]]:
    """Outputs per sample (batch 1): [sample][output]."""
    names = [i.name for i in sess.get_inputs()]
    return [sess.run(None, {k: data[k][i : i + 1] for k in names}) for i in range(n)]


def nms_dets(o: np.ndarray) -> list[tuple[int, float, np.ndarray]]:
    """[4+C, N] -> [(class, score, xyxy)] after threshold and class-wise NMS."""
    p = o.T
    sc = p[:, 4:]
    cls = sc.argmax(1)
    s = sc.max(1)
    keep = s >= SCORE_T
    p, cls, s = p[keep], cls[keep], s[keep]
    xyxy = np.stack(
        [
            p[:, 0] - p[:, 2] / 2,
            p[:, 1] - p[:, 3] / 2,
            p[:, 0] + p[:, 2] / 2,
            p[:, 1] + p[:, 3] / 2,
        ],
        1,
    )
    out = []
    for c in np.unique(cls):
        idx = np.where(cls == c)[0]
        idx = idx[np.argsort(-s[idx])]
        while len(idx):
            i = idx[0]
            out.append((int(c), float(s[i]), xyxy[i]))
            if len(idx) == 1:
                break
            ious = iou(xyxy[i], xyxy[idx[1:]])
            idx = idx[1:][ious < NMS_IOU]
    return out


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    b = np.atleast_2d(b)
    x1 = np.maximum(a[0], b[:, 0])
    y1 = np.maximum(a[1], b[:, 1])
    x2 = np.minimum(a[2], b[:, 2])
    y2 = np.minimum(a[3], b[:, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)

    def area(r: np.ndarray) -> np.ndarray:
        return np.clip(r[..., 2] - r[..., 0], 0, None) * np.clip(r[..., 3] - r[..., 1], 0, None)

    return inter / np.maximum(area(a) + area(b) - inter, 1e-9)


def match(ref, got) -> tuple[int, int]:
    """(matched fp32 detections, extra int8 detections)."""
    used = set()
    hit = 0
    for c, _s, box in sorted(ref, key=lambda d: -d[1]):
        best, bi = MATCH_IOU, None
        for j, (c2, _s2, b2) in enumerate(got):
            if j in used or c2 != c:
                continue
            v = float(iou(box, b2)[0])
            if v >= best:
                best, bi = v, j
        if bi is not None:
            used.add(bi)
            hit += 1
    return hit, len(got) - len(used)


def ctc(seq: np.ndarray) -> tuple[int, ...]:
    out, prev = [], -1
    for t in seq:
        if t != prev and t != 0:
            out.append(int(t))
        prev = t
    return tuple(out)


def accuracy(kind: str, ref: list, got: list, data: dict, out_names: list[str]) -> dict:
    n = len(ref)
    res: dict = {"outputs": {}}
    mask = data.get("attention_mask")
    for k, name in enumerate(out_names):
        cs = []
        for i in range(n):
            a, b = ref[i][k], got[i][k]
            if kind == "encoder" and mask is not None and a.ndim == 3:
                m = mask[i].astype(bool)
                a, b = a[0][m], b[0][m]
            cs.append(cos(a, b))
        res["outputs"][name] = {"worst": min(cs), "mean": float(np.mean(cs))}
    worst = min(o["worst"] for o in res["outputs"].values())
    fails = []
    if worst < TARGET:
        fails.append(f"cosine {worst:.4f}")
    if kind == "detector":
        box = min(cos(ref[i][0][0, :4], got[i][0][0, :4]) for i in range(n))
        score = min(cos(ref[i][0][0, 4:], got[i][0][0, 4:]) for i in range(n))
        nref = hit = extra = 0
        for i in range(n):
            r, g = nms_dets(ref[i][0][0]), nms_dets(got[i][0][0])
            h, x = match(r, g)
            nref += len(r)
            hit += h
            extra += x
        kept = hit / nref if nref else float("nan")
        res.update(box_cos=box, score_cos=score, fp32_dets=nref, kept=kept, extra=extra)
        res["task"] = (
            f"boxes cos {box:.4f}, scores cos {score:.4f}; kept {hit}/{nref} "
            f"({kept:.1%}), extra {extra}"
        )
        if score < TARGET:
            fails.append(f"score cos {score:.4f}")
        if nref < MIN_FP32_DETS:
            fails.append(f"FP32 found only {nref} detections")
        elif kept < TARGET:
            fails.append(f"kept {kept:.1%}")
    elif kind == "ocr_cls":
        agree = float(np.mean([ref[i][0].argmax() == got[i][0].argmax() for i in range(n)]))
        res.update(top1=agree)
        res["task"] = f"top-1 agreement {agree:.1%}"
        if agree < TARGET:
            fails.append(f"top-1 {agree:.1%}")
    elif kind == "ocr_rec":
        strs = float(
            np.mean(
                [ctc(ref[i][0][0].argmax(-1)) == ctc(got[i][0][0].argmax(-1)) for i in range(n)]
            )
        )
        steps = float(
            np.mean([np.mean(ref[i][0][0].argmax(-1) == got[i][0][0].argmax(-1)) for i in range(n)])
        )
        res.update(strings=strs, steps=steps)
        res["task"] = f"decoded text agreement {strs:.1%} (per-step argmax {steps:.1%})"
        if strs < TARGET:
            fails.append(f"text {strs:.1%}")
    elif kind == "encoder":

        def pooled(outs):
            e = []
            for i in range(n):
                m = mask[i].astype(bool)
                v = outs[i][0][0][m].mean(0)
                e.append(v / np.linalg.norm(v))
            return np.stack(e)

        pr, pg = pooled(ref), pooled(got)
        pc = float(min(cos(pr[i], pg[i]) for i in range(n)))
        sr, sg = pr @ pr.T, pg @ pg.T
        np.fill_diagonal(sr, -2)
        np.fill_diagonal(sg, -2)
        nn = float(np.mean(sr.argmax(1) == sg.argmax(1)))
        res.update(pooled_cos=pc, nn_agree=nn)
        res["task"] = f"sentence embedding cos {pc:.4f}; nearest-neighbour agreement {nn:.1%}"
        if pc < TARGET:
            fails.append(f"embedding cos {pc:.4f}")
    res["fails"] = fails
    res["meets"] = not fails
    return res
