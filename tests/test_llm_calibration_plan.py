"""The LLM calibration's point plan (what the simulator's cost model fits, for a study's
prompts, batches and chunk), its repeat-spread stop and its estimate of the time left:
pure functions, no model."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from engine.serve.llm.cal_plan import (
    Estimate,
    Needs,
    Point,
    grid_up,
    is_done,
    needs_from,
    plan_points,
)
from engine.serve.llm.calibrate import calibration_progress
from engine.serve.llm.sim import Layout


def keys(needs: Needs, context: int = 8192) -> list[str]:
    return [p.key for p in plan_points(needs, context)]


def test_the_plan_measures_the_points_the_cost_model_fits_for_the_study() -> None:
    """A 512-token study with three layouts (64 sequences, chunks of 256): prefill at four
    lengths up to 512 (a quadratic fit with a residual), decode at 1-8 sequences and at two
    longer contexts (the slope), the chunk built to 512 with small passes, the extras."""
    k = keys(Needs(512, 64, 256))
    assert [x for x in k if x.startswith("prefill")] == [
        "prefill 16", "prefill 128", "prefill 256", "prefill 512"]  # fmt: skip
    assert [x for x in k if x.startswith("decode")] == [
        "decode 1x64", "decode 2x64", "decode 4x64", "decode 8x64",
        "decode 1x256", "decode 1x512"]  # fmt: skip
    assert "chunks 256 to 512" in k
    assert k[-5:] == ["after prefills 16/64/256", "after pauses", "prompts after pauses",
                      "own work", "idle start"]  # fmt: skip
    (after,) = [p for p in plan_points(Needs(512, 64, 256), 8192) if p.kind == "after"]
    assert after.args == (16, 64, 256)  # the prefill lengths before which steps are timed
    # 28 minutes measured five prefill lengths to 1,024 and 20 continuing cases: no longer
    assert not any("1024" in x for x in k)


def test_the_plan_follows_the_study_short_prompts_few_sequences_no_chunked_layout() -> None:
    k = keys(Needs(100, 2, 0))
    assert [x for x in k if x.startswith("prefill")] == [
        "prefill 16", "prefill 32", "prefill 64", "prefill 128"]  # fmt: skip
    assert [x for x in k if x.startswith("decode")] == [
        "decode 1x64", "decode 2x64", "decode 1x128", "decode 1x256"]  # fmt: skip
    assert not any(x.startswith("chunks") for x in k)
    (after,) = [p for p in plan_points(Needs(100, 2, 0), 8192) if p.kind == "after"]
    assert after.args == (16, 64)  # none longer than the study's prompts
    assert "decode 6x64" in keys(Needs(100, 6, 0))  # the largest batch when under 8
    # the study's needs from its requests and layouts
    layouts = [Layout("colocated", max_seqs=16), Layout("chunked", chunk_tokens=128, max_seqs=32)]
    assert needs_from(np.asarray([30, 700, 90]), layouts) == Needs(700, 32, 128)


def test_nearby_workloads_share_their_points() -> None:
    """Prompt lengths round up to 64, 96, 128, 192, 256, 384, ...: 500 and 512 measure the
    same points (the second reuses the first's), 513 adds only the longer ones."""
    assert [grid_up(n) for n in (1, 64, 65, 97, 500, 512, 513, 1100)] == [
        64, 64, 96, 128, 512, 512, 768, 1536]  # fmt: skip
    assert keys(Needs(500, 8, 256)) == keys(Needs(512, 8, 256))
    longer = set(keys(Needs(513, 8, 256))) - set(keys(Needs(512, 8, 256)))
    assert {x for x in longer if x.startswith("prefill")} == {"prefill 192", "prefill 384",
                                                            "prefill 768"}  # fmt: skip
    # a model with a short context: every point fits in it
    for p in plan_points(Needs(4000, 8, 256), 2048):
        assert all(n < 2048 for n in p.args)


def rounds(*values: float) -> list[dict[str, Any]]:
    return [{"ms": [v]} for v in values]


def test_a_point_stops_once_its_repeats_agree_or_at_its_most() -> None:
    p = Point("prefill 512", "prefill", (512,), 3, 6)
    assert not is_done(p, rounds(100, 100))  # fewer than its least
    assert is_done(p, rounds(100, 101, 100))  # three that agree within 5%
    assert not is_done(p, rounds(100, 160, 90))  # spread wide: another round
    assert not is_done(p, rounds(100, 160, 90, 120, 80))
    assert is_done(p, rounds(100, 160, 90, 120, 80, 140))  # its most


def test_the_estimate_of_the_time_left_comes_from_the_rounds_own_times() -> None:
    """A point timed costs its mean round, one not yet its work at the rate of those timed;
    none timed: no estimate. Progress carries it in seconds and in words."""
    a = Point("prefill 512", "prefill", (512,), 3, 6)
    b = Point("prefill 128", "prefill", (128,), 3, 6)
    est = Estimate([a, b], {})
    assert est.left_s({}) is None
    est = Estimate([a, b], {"prefill 512": [2.0]})
    # a: two more rounds at 2 s; b: three rounds of 128 tokens at 2 s per 512 tokens
    assert est.left_s({"prefill 512": rounds(2000)}) == pytest.approx(2 * 2.0 + 3 * 0.5)
    assert (
        est.left_s({"prefill 512": rounds(2000, 2000, 2000), "prefill 128": rounds(1, 1, 1)}) == 0
    )
    ev = calibration_progress(a, 1, 12.4, 95.0)
    assert (ev.stage, ev.done, ev.total) == ("calibration", 12.0, 107.0)
    assert ev.message == "prefill 512, round 2; about 95 s left"
    assert calibration_progress(a, 0, 0.0, None).total is None


def test_a_points_key_names_all_it_measures() -> None:
    """Rounds are kept by key and reused by another study's plan: one key, one set of
    numbers (a longer study's 'after prefills' at 256 read rounds of 16 and 64: KeyError)."""
    from itertools import combinations

    plans = [plan_points(Needs(p, b, c), 2048) for p in (32, 100, 300, 1100)
             for b in (1, 4, 8) for c in (0, 64)]  # fmt: skip
    for one, other in combinations(plans, 2):
        for a in one:
            for b in other:
                if a.key == b.key:
                    assert (a.kind, a.args) == (b.kind, b.args), a.key
