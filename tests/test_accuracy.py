"""Output comparison across tensors, sequences and maps."""

import numpy as np
import pytest

from engine.measure.accuracy import compare_outputs, flatten_output


def test_identical_outputs() -> None:
    out = [np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]], np.float32)]
    r = compare_outputs(["logits"], [out], [out])
    assert r.max_abs_err == 0.0 and r.cosine == pytest.approx(1.0)
    assert r.top1_agreement == 1.0


def test_errors_and_top1_disagreement() -> None:
    ref = [np.array([[1.0, 2.0], [2.0, 1.0]], np.float32)]
    got = [np.array([[1.0, 2.5], [1.0, 2.0]], np.float32)]
    r = compare_outputs(["logits"], [ref], [got])
    assert r.max_abs_err == pytest.approx(1.0)
    assert r.mean_abs_err == pytest.approx((0 + 0.5 + 1 + 1) / 4)
    assert r.top1_agreement == 0.5
    assert r.cosine < 1.0


def test_non_score_outputs_have_no_top1() -> None:
    ref = [np.ones((2, 4, 8), np.float32)]
    r = compare_outputs(["hidden"], [ref], [ref])
    assert r.top1_agreement is None


def test_sequences_and_maps_are_flattened() -> None:
    zipmap = [{0: 0.1, 1: 0.9}, {0: 0.8, 1: 0.2}]
    assert np.allclose(flatten_output(zipmap), [0.1, 0.9, 0.8, 0.2])
    seq = [np.array([1, 2]), np.array([3.0])]
    assert np.allclose(flatten_output(seq), [1, 2, 3])
    assert flatten_output(np.array(["a"])) is None
    r = compare_outputs(
        ["label", "probs"],
        [[np.array([1, 0]), zipmap]],
        [[np.array([1, 0]), [{0: 0.1, 1: 0.9}, {0: 0.7, 1: 0.3}]]],
    )
    assert r.max_abs_err == pytest.approx(0.1)
    assert r.per_output["probs"]["max_abs_err"] == pytest.approx(0.1)


def test_mismatched_sizes_are_reported_not_crashed() -> None:
    r = compare_outputs(["y"], [[np.ones(3)]], [[np.ones(4)]])
    assert r.per_output["y"]["cosine"] is None
    assert np.isnan(r.cosine)


def test_the_headline_cosine_is_the_worst_output() -> None:
    """A large accurate output must not hide a small broken one (concatenated, the
    cosine would be ~1)."""
    big = np.linspace(1, 100, 10_000).astype(np.float32)
    small = np.array([1.0, -1.0, 1.0, -1.0], np.float32)
    r = compare_outputs(["logits", "score"], [[big, small]], [[big, -small]])
    assert r.per_output["logits"]["cosine"] == pytest.approx(1.0)
    assert r.per_output["score"]["cosine"] == pytest.approx(-1.0)
    assert r.cosine == pytest.approx(-1.0)


def test_an_embedding_shaped_like_scores_has_no_top1() -> None:
    ref = [np.random.default_rng(0).standard_normal((4, 384)).astype(np.float32)]
    got = [ref[0] + 0.5]
    assert compare_outputs(["sentence_embedding"], [ref], [got]).top1_agreement is None
    assert compare_outputs(["pooler_output"], [ref], [got]).top1_agreement is None
    assert compare_outputs(["logits"], [ref], [got]).top1_agreement is not None
