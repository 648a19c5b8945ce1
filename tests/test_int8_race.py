"""The INT8 search's choice by robust timing (#49, item 4): what meets the target is raced
side by side (interleaved rounds, engine/measure/interleave.py), the signed-weight settings
VNNI and AMX run fastest (per tensor and per channel) are always among the candidates, and
the result says how it was ranked."""

from __future__ import annotations

import json
import math
from collections.abc import Generator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.backends.ort import int8_choice
from engine.backends.ort.int8_choice import choose_int8
from engine.backends.ort.int8_target import (
    Attempt,
    candidate_settings,
    meet_target,
    speed_alternatives,
    summary,
)
from engine.config import RunConfig
from engine.events import Event, Notice, Progress
from engine.model.info import load_model
from tests.test_int8_target import _fake, _run, build_quant_sensitive

PER_TENSOR = {"weight_type": "QInt8", "per_channel": False, "reduce_range": False}


def _key(settings: dict[str, Any]) -> str:
    return json.dumps(settings, sort_keys=True)


def _racer(
    speed: dict[str, float], raced: list[list[str]]
) -> Any:  # a race on known speeds (ms by settings key)
    def race(
        pool: list[Attempt],
    ) -> Generator[Event, None, tuple[int, list[float], float, dict[str, Any]]]:
        raced.append([_key(a.settings) for a in pool])
        yield Progress("variant", 1, 2, "round 1 of 3")
        p50 = [speed.get(_key(a.settings), 2.0) for a in pool]
        i = min(range(len(pool)), key=lambda k: p50[k])
        return i, p50, 4.0, {"rounds": 3, "clock": "cpu", "line": "picked it"}

    return race


def test_vnni_races_qint8_per_tensor_beside_what_met_with_the_same_nodes() -> None:
    """MiniLM on a VNNI CPU: the first pick (QInt8 per channel) meets with one node in FP32;
    QInt8 per tensor with the same node was never built (one noisy timing decided before),
    now it is, and it wins the race by its speed."""
    first = candidate_settings("int8-dynamic", "vnni")[0]
    f, pt = _key(first), _key(PER_TENSOR)
    cosine = {(f, ()): 0.96, (f, ("a",)): 0.992, (pt, ("a",)): 0.991}
    how, (built, timed) = _fake(cosine, {}, [(["a"], 0.3)])
    how.start, how.far = dict(first), 2.0
    raced: list[list[str]] = []
    how.race = _racer({f: 6.5, pt: 5.0}, raced)
    how.alternatives = speed_alternatives("int8-dynamic", "vnni")
    events, out = _run(meet_target("int8-dynamic", 0.99, "vnni", how))
    assert (pt, ("a",)) in built
    assert raced == [[f, pt]]  # the most accurate listed first (a tie goes to it)
    assert out.met and out.chosen.settings == PER_TENSOR and out.chosen.excluded == ["a"]
    assert out.chosen.p50_ms == 5.0 and out.fp32_p50_ms == 4.0
    assert timed == []  # no single timing decided anything
    assert out.details()["ranking"]["rounds"] == 3
    assert "3 interleaved round(s) on cpu time" in summary(out.details())
    progress = [e.message for e in events if isinstance(e, Progress)]
    assert any("round 1 of 3" in m and "attempt" in m for m in progress)


def test_an_alternative_that_misses_the_target_is_not_raced() -> None:
    first = candidate_settings("int8-dynamic", "vnni")[0]
    f, pt = _key(first), _key(PER_TENSOR)
    how, (built, _) = _fake({(f, ()): 0.995, (pt, ()): 0.95}, {}, [])
    how.start = dict(first)
    raced: list[list[str]] = []
    how.race = _racer({pt: 1.0}, raced)
    how.alternatives = speed_alternatives("int8-dynamic", "vnni")
    _, out = _run(meet_target("int8-dynamic", 0.99, "vnni", how))
    assert (pt, ()) in built and raced == [[f]]
    assert out.chosen.settings == first


def test_with_a_race_every_earlier_setting_is_retried_with_the_nodes() -> None:
    """Without a race, only settings whose one timing read faster were retried with the
    nodes that met the target; a race retries every one of the same scope (QUInt8 read
    slow once and was never tried; here it meets and is fastest)."""
    tries = candidate_settings("int8-dynamic", "avx2")
    keys = [_key(s) for s in tries]
    cosine = {("{}", ()): 0.9, (keys[0], ()): 0.95, (keys[0], ("a",)): 0.992,
              (keys[1], ("a",)): 0.991}  # fmt: skip
    how, (built, _) = _fake(cosine, {keys[1]: 9.0}, [(["a"], 0.3)])
    raced: list[list[str]] = []
    how.race = _racer({keys[1]: 1.0, keys[0]: 2.0}, raced)
    _, out = _run(meet_target("int8-dynamic", 0.99, "avx2", how))
    assert (keys[1], ("a",)) in built
    assert out.chosen.settings == tries[1] and out.chosen.excluded == ["a"]


def test_speed_alternatives_are_signed_weights_on_vnni_and_amx_only() -> None:
    fast = speed_alternatives("int8-dynamic", "amx")
    assert fast == speed_alternatives("int8-dynamic", "vnni")
    assert {(s["weight_type"], s["per_channel"]) for s in fast} == {
        ("QInt8", True),
        ("QInt8", False),
    }
    assert all(s["reduce_range"] is False for s in fast)
    assert speed_alternatives("int8-dynamic", "avx2") == []


@pytest.mark.parametrize("isa", ["vnni", "avx2"])
def test_the_real_search_races_what_meets_and_says_how(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isa: str
) -> None:
    """A small real model, INT8 dynamic held to a target only a node in FP32 meets: the
    pick comes from interleaved rounds against FP32 (CPU time: one thread, no spinning),
    with its spread, rounds and contention in the details and a line of its own."""
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(int8_choice, "cpu_isa", lambda: isa)
    monkeypatch.setattr(int8_choice, "RACE_WINDOW_S", 0.02)
    _, info = load_model(build_quant_sensitive(tmp_path))
    rng = np.random.default_rng(1)
    feeds = [{"x": rng.standard_normal((8, 64)).astype(np.float32)} for _ in range(3)]
    config = RunConfig(precision="int8-dynamic", min_cosine=0.999, threads=1)
    events, variant = _run(choose_int8(info, config, None, "none", 0, feeds, "t", False))
    int8 = variant.details["int8"]
    assert int8["met"]
    ranking = int8["ranking"]
    assert ranking["clock"] == "cpu" and ranking["rounds"] >= 3
    assert ranking["pick"] is not None and ranking["contention"] is not None
    names = [s["name"] for s in ranking["standings"]]
    assert "fp32" in names
    chosen = next(s for s in ranking["standings"] if s["name"] == ranking["pick"])
    lo, hi = chosen["cpu_spread_ms"]
    assert lo <= chosen["cpu_ms"] <= hi
    assert math.isfinite(int8["p50_ms"]) and math.isfinite(int8["fp32_p50_ms"])
    assert ranking["speedup_fp32"]["median"] > 0 and ranking["speedup_fp32"]["clock"] == "cpu"
    said = [e.message for e in events if isinstance(e, Notice)]
    assert any(m.startswith("INT8 picked") for m in said)
    settings = {_key(a["settings"]) for a in int8["attempts"] if a["excluded"]}
    if isa == "vnni":  # QInt8 per tensor tried with the nodes that met the target
        assert _key(PER_TENSOR) in settings
    else:
        assert _key(PER_TENSOR) not in settings


def test_the_benchmarks_check_passes_the_fastest_and_ties_and_fails_a_slower_pick() -> None:
    """bench/int8_choice.py's judgement: the pick passes when it is the fastest that meets
    the target, or when the fastest does not separate from it; not when it is slower
    beyond the spread."""
    import sys

    from engine.measure.interleave import Ranking, Standing

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    import int8_choice as bench

    def ranking(*rounds: list[float]) -> Ranking:
        stands = [
            Standing(n, i, list(r))
            for i, (n, r) in enumerate(zip("abc"[: len(rounds)], rounds, strict=True))
        ]
        stands.append(Standing("fp32", 3, [9.0, 9.0, 9.0]))
        return Ranking(stands, 0, "clear", [], "b", 1.0, (1.0, 1.0), 3, False, "cpu")

    fast, slow, close = [1.0, 1.1, 1.0], [1.5, 1.6, 1.5], [1.01, 1.05, 0.98]
    assert bench.check(ranking(fast, slow), "a")[0]
    ok, why = bench.check(ranking(slow, fast), "a")
    assert not ok and "SLOWER beyond the spread" in why
    ok, why = bench.check(ranking(close, fast), "a")
    assert ok and "within the spread" in why
    assert not bench.check(ranking(fast, slow), "z")[0]  # not among those that meet
