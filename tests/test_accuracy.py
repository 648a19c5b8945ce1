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


def test_pooled_or_normalized_outputs_are_vectors_by_their_graph() -> None:
    """A third party's export names its pooled sentence embedding "461" ([batch, 384], like
    class scores): the graph says it is a mean pooling, so no top-1 (it read 84% before)."""
    import onnx
    from onnx import TensorProto, helper

    from engine.model.info import vector_outputs

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    nodes = [
        helper.make_node("ReduceSum", ["x", "axes"], ["summed"], keepdims=0),
        helper.make_node("Div", ["summed", "count"], ["mean"]),  # mean pooling
        helper.make_node("Concat", ["mean"], ["461"], axis=1),  # a pass-through
        helper.make_node("MatMul", ["mean", "w"], ["logits"]),  # class scores
        helper.make_node("Exp", ["logits"], ["e"]),
        helper.make_node("ReduceSum", ["e", "axes1"], ["z"], keepdims=1),
        helper.make_node("Div", ["e", "z"], ["probs"]),  # a softmax written out
        helper.make_node("LayerNormalization", ["mean", "g", "b"], ["normed"]),
    ]
    inits = [
        helper.make_tensor("axes", TensorProto.INT64, [1], [1]),
        helper.make_tensor("axes1", TensorProto.INT64, [1], [1]),
        helper.make_tensor("count", TensorProto.FLOAT, [], [3.0]),
        helper.make_tensor("w", TensorProto.FLOAT, [4, 5], [0.1] * 20),
        helper.make_tensor("g", TensorProto.FLOAT, [4], [1.0] * 4),
        helper.make_tensor("b", TensorProto.FLOAT, [4], [0.0] * 4),
    ]
    outs = [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, None)
        for n in ("461", "logits", "probs", "normed")
    ]
    graph = helper.make_graph(nodes, "g", [x], outs, inits)
    vectors = vector_outputs(onnx.helper.make_model(graph).graph)
    assert vectors == {"461", "normed"}

    rng = np.random.default_rng(0)
    ref = [rng.normal(size=(8, 4)).astype(np.float32) for _ in range(4)]
    got = [r[:, ::-1].copy() for r in ref]  # every argmax moves
    r = compare_outputs(["461", "logits", "probs", "normed"], [ref], [got], vectors=vectors)
    assert r.per_output["461"]["top1_agreement"] is None
    assert r.per_output["normed"]["top1_agreement"] is None
    assert r.per_output["logits"]["top1_agreement"] is not None
    assert r.per_output["probs"]["top1_agreement"] is not None
