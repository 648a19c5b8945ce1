"""INT8 with an accuracy target: the search order (settings that suit the CPU, then nodes
kept in FP32), the node ranking on a model built to be sensitive, and the CLI's report."""

from __future__ import annotations

import json
import math
from collections.abc import Generator
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends.ort.int8_target import (
    Search,
    candidate_settings,
    meet_target,
    starting_settings,
    summary,
)
from engine.errors import ModelError
from engine.events import Event, Notice, VariantReady
from tests.model_zoo import FLOAT, make, node, rng, save, tensor, tinfo


def build_quant_sensitive(out_dir: Path) -> Path:
    """x -> MatMul+Add (one feature offset by 1000) -> MatMul `mm_sensitive` (ignores that
    feature) -> Relu -> MatMul -> MatMul. Quantizing `mm_sensitive`'s input per tensor
    spends every step on the offset feature and rounds the others to zero, whatever the
    weight settings: only keeping that MatMul in FP32 restores the output."""
    r = rng(7)
    n = 64
    w1 = (r.standard_normal((n, n)) * 0.2).astype(np.float32)
    b1 = np.zeros(n, np.float32)
    b1[0] = 1000.0
    w2 = (r.standard_normal((n, n)) * 0.2).astype(np.float32)
    w2[0, :] = 0.0
    w3 = (r.standard_normal((n, n)) * 0.2).astype(np.float32)
    w4 = (r.standard_normal((n, 10)) * 0.2).astype(np.float32)
    nodes = [
        node("MatMul", ["x", "w1"], ["h1"], "mm_in"),
        node("Add", ["h1", "b1"], ["h2"], "add_outlier"),
        node("MatMul", ["h2", "w2"], ["h3"], "mm_sensitive"),
        node("Relu", ["h3"], ["h4"], "relu"),
        node("MatMul", ["h4", "w3"], ["h5"], "mm_mid"),
        node("MatMul", ["h5", "w4"], ["y"], "mm_out"),
    ]
    model = make(
        "quant_sensitive", nodes, [tinfo("x", FLOAT, ["batch", n])],
        [tinfo("y", FLOAT, ["batch", 10])],
        [tensor("w1", w1), tensor("b1", b1), tensor("w2", w2), tensor("w3", w3),
         tensor("w4", w4)],
    )  # fmt: skip
    return save(model, out_dir, "quant_sensitive")


# -- the search, with fakes --------------------------------------------------------------
def _fake(
    cosine: dict[tuple[str, tuple[str, ...]], float],
    speed: dict[str, float],
    ranking: list[tuple[list[str], float]],
) -> tuple[Search, list[Any]]:
    """`cosine[(settings key, excluded)]`, `speed[settings key]` (ms); every build logged."""
    built: list[Any] = []
    timed: list[str] = []

    def key(settings: dict[str, Any]) -> str:
        return json.dumps(settings, sort_keys=True)

    def build(
        settings: dict[str, Any], excluded: list[str]
    ) -> Generator[Event, None, VariantReady]:
        built.append((key(settings), tuple(excluded)))
        yield Notice("info", "built")
        return VariantReady("int8-dynamic", f"{key(settings)}|{','.join(excluded)}", 0.0, False, 1)

    def score(v: VariantReady) -> float:
        s, _, ex = v.path.partition("|")
        return cosine.get((s, tuple(x for x in ex.split(",") if x)), 0.5)

    def time(path: str) -> float:
        timed.append(path)
        return speed.get(path.partition("|")[0], 2.0) if path != "fp32" else 4.0

    def rank(
        v: VariantReady, settings: dict[str, Any], excluded: list[str]
    ) -> Generator[Event, None, list[tuple[list[str], float]]]:
        yield Notice("info", "ranked")
        return ranking

    # (far=inf: every candidate setting is tried, whatever the miss; see the jump's test)
    return Search(build, score, time, rank, 10, "fp32", far=math.inf), [built, timed]


def _run(gen: Generator[Event, None, Any]) -> tuple[list[Event], Any]:
    events: list[Event] = []
    while True:
        try:
            events.append(next(gen))
        except StopIteration as stop:
            return events, stop.value


def test_the_default_that_meets_the_target_is_kept_without_a_search() -> None:
    how, (built, timed) = _fake({("{}", ()): 0.999}, {}, [])
    _, out = _run(meet_target("int8-dynamic", 0.99, "vnni", how))
    assert out.met and out.chosen.settings == {} and len(out.attempts) == 1
    assert built == [("{}", ())] and timed == []  # nothing timed when nothing is searched
    assert math.isnan(out.chosen.p50_ms)


def test_the_fastest_setting_that_meets_the_target_wins() -> None:
    tries = [json.dumps(s, sort_keys=True) for s in candidate_settings("int8-dynamic", "vnni")]
    cosine = {("{}", ()): 0.95, (tries[0], ()): 0.995, (tries[1], ()): 0.993}
    speed = {tries[0]: 3.0, tries[1]: 1.5}
    how, _ = _fake(cosine, speed, [])
    _, out = _run(meet_target("int8-dynamic", 0.99, "vnni", how))
    assert out.met and json.dumps(out.chosen.settings, sort_keys=True) == tries[1]
    assert len(out.attempts) == 1 + len(tries) and out.fp32_p50_ms == 4.0
    assert "2.67x FP32" in summary(out.details())


def test_settings_that_cannot_be_built_are_skipped() -> None:
    """The transformer-only static settings (MatMul/Gemm, Percentile) on a CNN with no
    MatMul: ONNX Runtime's calibrator raises ('Histogram has not been collected'); the
    search goes on to the next settings instead of failing the whole INT8 build."""
    tries = [json.dumps(s, sort_keys=True) for s in candidate_settings("int8-static", "vnni")]
    cosine = {("{}", ()): 0.95, (tries[1], ()): 0.995}
    how, _ = _fake(cosine, {}, [])
    build = how.build

    def failing(settings: dict[str, Any], excluded: list[str]) -> Any:
        if json.dumps(settings, sort_keys=True) == tries[0]:
            raise ModelError("cannot build the int8-static variant: Histogram has not been "
                             "collected. Please run collect() first.", "detector.onnx")  # fmt: skip
        return (yield from build(settings, excluded))

    how.build = failing
    events, out = _run(meet_target("int8-static", 0.99, "vnni", how))
    assert out.met and json.dumps(out.chosen.settings, sort_keys=True) == tries[1]
    said = [e.message for e in events if isinstance(e, Notice) and "do not apply" in e.message]
    assert len(said) == 1 and "Histogram" in said[0]


def test_static_int8_on_a_transformer_starts_from_the_weights_matmuls() -> None:
    """A model with MatMuls and no convolution starts static INT8 from this CPU's MatMul-only
    setting (not tried again among the candidates); a CNN and dynamic INT8 from the
    defaults."""
    transformer = {"MatMul": 32, "Add": 37, "LayerNormalization": 8, "Softmax": 4}
    start = starting_settings("int8-static", "vnni", transformer)
    assert start == candidate_settings("int8-static", "vnni")[0]
    assert start["op_types"] == ["MatMul", "Gemm"] and start["activation_matmuls"] is False
    assert starting_settings("int8-static", "avx2", transformer)["reduce_range"] is True
    assert starting_settings("int8-static", "vnni", {"Conv": 8, "Gemm": 1, "Relu": 8}) == {}
    assert starting_settings("int8-dynamic", "avx2", transformer) == {}
    # VNNI: not AVX2's 7-bit defaults but its own first pick (full-range, per channel)
    assert (
        starting_settings("int8-dynamic", "vnni", transformer)
        == (candidate_settings("int8-dynamic", "vnni")[0])
    )
    assert starting_settings("int8-static", "vnni", {"LSTM": 1}) == {}

    first = json.dumps(start, sort_keys=True)
    how, (built, _) = _fake({(first, ()): 0.95}, {}, [])
    how.start = start
    _, out = _run(meet_target("int8-static", 0.99, "vnni", how))
    keys = [b[0] for b in built if not b[1]]
    assert keys[0] == first and keys.count(first) == 1  # built once, first
    assert len(keys) == len(candidate_settings("int8-static", "vnni"))
    assert out.attempts[0].settings == start


def test_settings_differ_by_instruction_set() -> None:
    fast = candidate_settings("int8-dynamic", "vnni")
    slow = candidate_settings("int8-dynamic", "avx2")
    assert fast[0]["reduce_range"] is False  # VNNI does not saturate: full-range weights
    assert all(s["reduce_range"] or s["weight_type"] == "QUInt8" for s in slow)
    assert candidate_settings("int8-dynamic", "amx") == fast


def test_sensitive_nodes_are_kept_in_fp32_a_few_more_each_round() -> None:
    ranking = [(["a"], 0.3), (["b", "b_relu"], 0.2), (["c"], 0.1), (["d"], 0.05)]
    best = json.dumps(candidate_settings("int8-dynamic", "avx2")[0], sort_keys=True)
    cosine = {(best, ()): 0.9, (best, ("a",)): 0.95, (best, ("a", "b", "b_relu", "c")): 0.992}
    how, (built, _) = _fake(cosine, {}, ranking)
    _, out = _run(meet_target("int8-dynamic", 0.99, "avx2", how))
    assert out.met and out.chosen.excluded == ["a", "b", "b_relu", "c"]
    # rounds of 1 then 2 more units; then the fewer of that round's units ("a" + unit b)
    # tried, missing the target here; then each node tried back in INT8 (all missing)
    assert [b[1] for b in built[-7:-4]] == [
        ("a",), ("a", "b", "b_relu", "c"), ("a", "b", "b_relu")
    ]  # fmt: skip
    assert [b[1] for b in built[-4:]] == [
        ("b", "b_relu", "c"), ("a", "b_relu", "c"), ("a", "b", "c"), ("a", "b", "b_relu")
    ]  # fmt: skip


def test_a_node_the_target_does_not_need_goes_back_to_int8() -> None:
    """Pruning: met with a, b, c in FP32 where b alone does the work; a and c go back."""
    ranking = [(["a"], 0.3), (["b"], 0.2), (["c"], 0.1)]
    best = json.dumps(candidate_settings("int8-dynamic", "avx2")[0], sort_keys=True)
    cosine = {(best, ()): 0.9, (best, ("a", "b", "c")): 0.995, (best, ("b", "c")): 0.994,
              (best, ("b",)): 0.993}  # fmt: skip
    how, (_built, _) = _fake(cosine, {}, ranking)
    _, out = _run(meet_target("int8-dynamic", 0.99, "avx2", how))
    assert out.met and out.chosen.excluded == ["b"]


def test_the_fewest_units_of_the_round_that_met_the_target_are_kept() -> None:
    ranking = [([f"n{i}"], 0.1 - i / 100) for i in range(9)]
    best = json.dumps(candidate_settings("int8-dynamic", "avx2")[0], sort_keys=True)
    names = [f"n{i}" for i in range(9)]
    cosine = {(best, tuple(names[:k])): 0.95 + (0.05 if k >= 4 else 0) for k in range(0, 9)}
    how, (built, _) = _fake(cosine, {}, ranking)
    _, out = _run(meet_target("int8-dynamic", 0.99, "avx2", how))
    # rounds: 1, 1+2, 3+2 (the budget: half of 10 quantizable) = 5 meets; then the round's
    # first unit alone: 4 meets too
    assert out.met and out.chosen.excluded == names[:4]
    assert [len(b[1]) for b in built[-6:-4]] == [5, 4]
    assert [len(b[1]) for b in built[-4:]] == [3, 3, 3, 3]  # each tried back in INT8
