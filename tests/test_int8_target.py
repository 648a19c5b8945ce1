"""INT8 with an accuracy target: the search order (settings that suit the CPU, then nodes
kept in FP32), the node ranking on a model built to be sensitive, and the CLI's report."""

from __future__ import annotations

import json
import math
from collections.abc import Generator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.backends.ort.int8_target import Search, candidate_settings, meet_target, summary
from engine.events import Event, Notice, VariantReady
from tests.model_zoo import FLOAT, make, node, rng, save, tensor, tinfo
from tests.test_cli import opscope


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

    return Search(build, score, time, rank, 10, "fp32"), [built, timed]


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
    assert [b[1] for b in built[-2:]] == [("a",), ("a", "b", "b_relu", "c")]


def test_an_unreachable_target_keeps_the_most_accurate_and_says_so() -> None:
    ranking = [([f"n{i}"], 0.1) for i in range(10)]
    how, _ = _fake({}, {}, ranking)
    events, out = _run(meet_target("int8-dynamic", 0.99, "vnni", how))
    assert not out.met
    assert len(out.chosen.excluded) <= 5  # never past half the quantizable nodes
    warning = [e for e in events if isinstance(e, Notice) and e.level == "warning"]
    assert warning and "cannot reach cosine 0.99" in warning[0].message


# -- on a real model ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def sensitive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_quant_sensitive(tmp_path_factory.mktemp("sensitive"))


def test_the_sensitive_node_ranks_first(sensitive: Path, tmp_path: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from engine.backends.ort.int8_sensitivity import node_errors

    quant = tmp_path / "q.onnx"
    quantize_dynamic(str(sensitive), str(quant), weight_type=QuantType.QInt8)
    feeds = [{"x": rng(i).standard_normal((2, 64)).astype(np.float32)} for i in range(3)]
    ranking = node_errors(str(sensitive), str(quant), feeds, {"MatMul"})
    assert ranking[0][0] == ["mm_sensitive"] and ranking[0][1] > 0.1


@pytest.mark.parametrize("precision", ["int8-dynamic", "int8-static"])
def test_bench_meets_the_target_by_keeping_the_node_in_fp32(
    sensitive: Path, tmp_path: Path, precision: str
) -> None:
    out = tmp_path / "r.json"
    proc = opscope("bench", sensitive, "--precision", precision, "--duration", "0.3",
                   "--warmup", "3", "--no-live", "--json", out, check=True)  # fmt: skip
    data = json.loads(out.read_text())
    v = data["variant"]
    assert v["met"] is True and v["min_cosine"] == 0.99
    assert "mm_sensitive" in v["excluded_nodes"]
    assert v["attempts"][0]["cosine"] < 0.9 and len(v["attempts"]) >= 2
    assert all(set(a) == {"settings", "excluded", "cosine", "p50_ms"} for a in v["attempts"])
    assert data["accuracy"]["cosine"] >= 0.99
    assert "in FP32: " in proc.stdout and "mm_sensitive" in proc.stdout
    again = opscope("bench", sensitive, "--precision", precision, "--duration", "0.3",
                    "--warmup", "3", "--no-live", check=True)  # fmt: skip
    assert "chosen earlier on this machine" in again.stderr + again.stdout


def test_a_lower_target_takes_the_default(sensitive: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    opscope("bench", sensitive, "--precision", "int8-dynamic", "--min-cosine", "0.5",
            "--duration", "0.3", "--warmup", "3", "--no-live", "--json", out,
            check=True)  # fmt: skip
    v = json.loads(out.read_text())["variant"]
    assert v["met"] and v["excluded_nodes"] == [] and len(v["attempts"]) == 1


def test_a_target_outside_zero_one_is_one_line(sensitive: Path) -> None:
    proc = opscope("bench", sensitive, "--precision", "int8-dynamic", "--min-cosine", "1.5")
    assert proc.returncode == 2 and "must be within (0, 1]" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_nodes_found_on_the_most_accurate_setting_are_tried_on_faster_ones() -> None:
    """Exclusions found on the most accurate (slow) setting, then tried on the faster
    settings: the fastest that meets the target wins."""
    tries = [json.dumps(s, sort_keys=True) for s in candidate_settings("int8-dynamic", "vnni")]
    accurate, fast = tries[3], tries[0]
    cosine = {
        ("{}", ()): 0.90, (fast, ()): 0.96, (accurate, ()): 0.985,
        (accurate, ("n1",)): 0.991, (fast, ("n1",)): 0.9916,
    }  # fmt: skip
    speed = {fast: 1.0, accurate: 2.0, "{}": 1.2}
    how, (built, _) = _fake(cosine, speed, [(["n1"], 0.02), (["n2"], 0.01)])
    _, out = _run(meet_target("int8-dynamic", 0.99, "vnni", how))
    assert out.met and out.chosen.excluded == ["n1"]
    assert json.dumps(out.chosen.settings, sort_keys=True) == fast
    assert (accurate, ("n1",)) in built and (fast, ("n1",)) in built
