"""Accuracy judged per output, per sample, per channel group and by task metric (issue #50):
a whole-output cosine that boxes dominate must not call collapsed scores "met"."""

from __future__ import annotations

import numpy as np

from engine.measure.accuracy import compare_outputs, describe_check
from engine.measure.detections import kept
from engine.measure.output_parts import channel_groups, is_probabilities, split_samples


def _yolo_output(rng: np.random.Generator, anchors: int = 400, classes: int = 6) -> np.ndarray:
    """[1, 4 + classes, anchors]: boxes 0-320 then scores 0-1, a few confident anchors."""
    boxes = np.stack(
        [
            rng.uniform(40, 280, anchors),
            rng.uniform(40, 280, anchors),
            rng.uniform(10, 60, anchors),
            rng.uniform(10, 60, anchors),
        ]
    )
    scores = rng.uniform(0, 0.05, (classes, anchors))
    hot = rng.choice(anchors, 5, replace=False)
    scores[rng.integers(0, classes, 5), hot] = rng.uniform(0.6, 0.95, 5)
    return np.concatenate([boxes, scores])[None].astype(np.float32)


def test_collapsed_scores_fail_where_the_whole_output_cosine_passes() -> None:
    rng = np.random.default_rng(0)
    ref = [[_yolo_output(rng)] for _ in range(8)]
    got = [[np.concatenate([r[0][:, :4], np.zeros_like(r[0][:, 4:])], 1)] for r in ref]
    feeds = [{"images": np.zeros((1, 3, 8, 8), np.float32)} for _ in ref]
    r = compare_outputs(["output0"], ref, got, feeds=feeds)
    whole = next(c for c in r.checks if c["metric"] == "cosine" and not c["part"])
    assert whole["worst"] > 0.99  # what used to be reported: "met"
    parts = {c["part"]: c for c in r.checks if c["metric"] == "cosine" and c["part"]}
    assert set(parts) == {"channels 0-3", "channels 4-9"}
    assert parts["channels 4-9"]["worst"] == 0.0
    detections = next(c for c in r.checks if c["metric"] == "detections kept")
    assert detections["worst"] == 0.0 and "0 of FP32's" in detections["detail"]
    assert not r.meets(0.99) and r.score == 0.0
    assert r.worst is not None and "channels 4-9" in describe_check(r.worst)
    same = compare_outputs(["output0"], ref, ref, feeds=feeds)
    assert same.meets(0.99)
    assert next(c for c in same.checks if c["metric"] == "detections kept")["worst"] == 1.0


def test_one_bad_sample_is_the_judged_figure_and_the_mean_is_beside_it() -> None:
    rng = np.random.default_rng(1)
    ref = [[rng.standard_normal((1, 16, 32)).astype(np.float32)] for _ in range(64)]
    got = [[r[0] + 0.001 * rng.standard_normal(r[0].shape).astype(np.float32)] for r in ref]
    got[17] = [rng.standard_normal((1, 16, 32)).astype(np.float32)]  # one sample broken
    r = compare_outputs(["last_hidden_state"], ref, got, feeds=[{"x": a[0]} for a in ref])
    assert r.samples == 64
    assert r.cosine < 0.5 and r.mean_cosine > 0.95
    assert r.worst is not None and r.worst["sample"] == 17


def test_padding_positions_are_left_out_of_a_sample() -> None:
    ref = np.ones((2, 4, 3), np.float32)
    got = ref.copy()
    got[:, 3] = -50.0  # what the model writes at the padded position
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 0]], np.int64)
    r = compare_outputs(["hidden"], [[ref]], [[got]], feeds=[{"attention_mask": mask}])
    assert r.cosine > 0.9999 and r.samples == 2
    unmasked = compare_outputs(["hidden"], [[ref]], [[got]])
    assert unmasked.cosine < 0.5
    assert len(split_samples(ref, 2, mask)) == 2 and split_samples(ref, 2, mask)[0].size == 9


def test_class_scores_are_judged_by_top1_and_probabilities_per_position() -> None:
    rng = np.random.default_rng(2)
    logits = rng.standard_normal((32, 100)).astype(np.float32)
    flipped = logits.copy()
    top = logits.argmax(1)
    second = np.sort(logits[0])[-2]
    flipped[0, top[0]] = second - 0.01  # one of 32 changes its class; cosine barely moves
    r = compare_outputs(["logits"], [[logits]], [[flipped]], feeds=[{"x": logits}])
    top1 = next(c for c in r.checks if c["metric"] == "top-1 agreement")
    assert top1["worst"] == 31 / 32 and r.cosine > 0.96
    assert not r.meets(0.99) and r.meets(0.96)
    probs = np.exp(rng.standard_normal((2, 40, 30)))
    probs /= probs.sum(-1, keepdims=True)
    assert is_probabilities([probs])
    other = probs[:, :, ::-1].copy()
    r = compare_outputs(["softmax_0.tmp_0"], [[probs]], [[other]], feeds=[{"x": probs}])
    per_position = next(c for c in r.checks if c["metric"] == "top-1 agreement")
    assert "positions" in per_position["detail"] and per_position["worst"] < 0.2


def test_a_regression_output_is_not_judged_by_its_argmax() -> None:
    xy = np.array([[0.2, 0.3], [0.5, 0.1]], np.float32)
    r = compare_outputs(["offset"], [[xy]], [[xy[:, ::-1].copy()]], feeds=[{"x": xy}])
    assert not any(c["metric"] == "top-1 agreement" for c in r.checks)


def test_channel_groups_need_a_gap_and_a_long_axis() -> None:
    rng = np.random.default_rng(3)
    assert channel_groups([_yolo_output(rng)]) == (1, [(0, 4), (4, 10)])
    transposed = np.transpose(_yolo_output(rng), (0, 2, 1))
    assert channel_groups([transposed]) == (2, [(0, 4), (4, 10)])
    hidden = rng.standard_normal((1, 12, 384))  # a short text's hidden states: one scale
    assert channel_groups([hidden]) is None


def test_detections_match_by_class_and_overlap() -> None:
    out = np.zeros((6, 3), np.float32)  # 4 box rows + 2 classes, 3 anchors
    out[:4, 0] = [50, 50, 20, 20]
    out[:4, 1] = [51, 50, 20, 20]  # the same object, lower score: suppressed
    out[:4, 2] = [200, 200, 30, 30]
    out[4, 0], out[4, 1], out[5, 2] = 0.9, 0.8, 0.7
    k = kept(out, out, 0)
    assert (k.matched, k.reference, k.candidate) == (2, 2, 2) and k.share == 1.0
    lost = out.copy()
    lost[5, 2] = 0.1
    assert kept(out, lost, 0).share == 2 * 1 / 3
