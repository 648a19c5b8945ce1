"""The slow-stretch process: fitted on batches in the order they ran, drawn with memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.serve.batching import BatchPolicy
from engine.serve.records import summarize
from engine.serve.sim.service import ServiceModel
from engine.serve.sim.simulate import simulate
from engine.serve.sim.slow_stretches import SLOW, SlowStretches
from engine.serve.traffic.schedule import make_schedule, parse_traffic


def chain(n: int, enter: float, leave: float, seed: int) -> np.ndarray:
    """Ratios from a known two-state chain: normal ~1.0, slow ~2.5."""
    rng = np.random.default_rng(seed)
    slow, out = False, np.empty(n)
    for i in range(n):
        slow = rng.random() < (1 - leave if slow else enter)
        out[i] = rng.uniform(2.0, 3.0) if slow else rng.uniform(0.9, 1.1)
    return out


def test_fit_recovers_the_chances_and_draws_keep_them() -> None:
    runs = [chain(20_000, 0.01, 0.1, seed) for seed in range(3)]
    fitted = SlowStretches.fit(runs)
    assert fitted is not None
    assert fitted.enter == pytest.approx(0.01, rel=0.15)
    assert fitted.leave == pytest.approx(0.1, rel=0.15)
    assert (fitted.slow > SLOW).all() and (fitted.normal <= SLOW).all()
    m = fitted.multipliers(200_000, seed=1)
    slow = m > SLOW
    assert slow.mean() == pytest.approx(fitted.slow_share, rel=0.1)
    starts = np.flatnonzero(np.diff(slow.astype(int)) == 1)
    assert slow.sum() / len(starts) == pytest.approx(fitted.mean_stretch, rel=0.15)


def test_too_few_or_uniform_batches_give_no_process() -> None:
    assert SlowStretches.fit([np.ones(10)]) is None
    assert SlowStretches.fit([np.ones(1000)]) is None  # no slow batch: nothing to model
    assert SlowStretches.fit([]) is None


def test_a_one_off_disturbance_is_left_out_and_recurring_stretches_kept() -> None:
    """A calibration whose batches hold one long disturbance (35 slow batches in a row, as
    a build on the machine would make) beside the machine's recurring short stretches: the
    windows the others do not agree with are left out (also when it spans two windows,
    which then agree with each other), so the fitted share stays near the
    recurring one, where fitting every batch takes the disturbance for the machine's
    habit. Recurring stretches alone, and a machine slow half the time, lose nothing."""
    share = SlowStretches.fit([chain(600, 0.015, 0.5, 20)]).slow_share  # type: ignore[union-attr]
    runs = [chain(150, 0.015, 0.5, 20 + k) for k in range(4)]
    assert SlowStretches.fit(runs).left_out == 0  # type: ignore[union-attr]
    same, pooled = SlowStretches.fit(runs), SlowStretches.fit(runs, robust=False)
    assert same is not None and pooled is not None and same.enter == pooled.enter
    disturbed = [r.copy() for r in runs]
    disturbed[2][40:75] = np.random.default_rng(0).uniform(1.6, 3.0, 35)
    robust, every = SlowStretches.fit(disturbed), SlowStretches.fit(disturbed, robust=False)
    assert robust is not None and every is not None
    assert robust.left_out >= 1 and robust.windows == 20 and every.left_out == 0
    assert abs(robust.slow_share - share) < 0.5 * abs(every.slow_share - share)
    across = [r.copy() for r in runs]  # the same disturbance across two windows (20-55)
    across[2][20:55] = np.random.default_rng(0).uniform(1.6, 3.0, 35)
    both = SlowStretches.fit(across)
    assert both is not None and both.left_out >= 2
    assert abs(both.slow_share - share) < 0.5 * abs(every.slow_share - share)
    bursty = SlowStretches.fit([chain(150, 0.08, 0.1, k) for k in range(4)])
    assert bursty is not None and bursty.left_out == 0 and bursty.slow_share > 0.3
    from engine.serve.sim.slow_stretches import stretches_text, summary

    said = stretches_text(summary(robust))
    assert f"{robust.left_out} of 20 windows of 32 batches left out" in said
    assert stretches_text(None).startswith("no slow stretch")


def test_json_round_trip_and_hostile_values() -> None:
    fitted = SlowStretches.fit([chain(5000, 0.02, 0.2, 0)])
    assert fitted is not None
    back = SlowStretches.from_json(fitted.to_json())
    assert back.enter == fitted.enter and back.slow.size == fitted.slow.size
    older = {k: v for k, v in fitted.to_json().items() if k not in ("windows", "left_out")}
    assert SlowStretches.from_json(older).left_out == 0  # a calibration cached before them
    for bad in (
        {**fitted.to_json(), "enter": 0},
        {**fitted.to_json(), "leave": 2},
        {**fitted.to_json(), "slow": [-1.0]},
        {**fitted.to_json(), "normal": []},
        {**fitted.to_json(), "windows": 2, "left_out": 3},
        {**fitted.to_json(), "left_out": -1},
    ):
        with pytest.raises(ValueError):
            SlowStretches.from_json(bad)
    samples = {1: np.full(50, 0.001), 2: np.full(50, 0.0015)}
    model = ServiceModel(samples, {}, stretches=fitted)
    again = ServiceModel.from_json(model.to_json())
    assert again.stretches is not None and again.stretches.leave == fitted.leave


def test_stretches_raise_the_p99_that_one_by_one_draws_spread_out() -> None:
    """The same slow batches, in runs rather than alone: the queue backs up and p99 grows;
    p50, set by the normal batches, hardly moves."""
    ratios = chain(40_000, 0.004, 0.05, 3)  # 7% of batches slow, stretches of ~20
    fitted = SlowStretches.fit([ratios])
    assert fitted is not None
    base = 0.001
    samples = {n: base * n**0.8 * ratios[:4000] for n in (1, 2, 4, 8)}  # same spread, iid
    model = ServiceModel(samples, {}, stretches=fitted)
    policy = BatchPolicy(max_batch=8, delay_ms=2.0)
    rate = 0.6 * model.capacity(8)
    schedule = make_schedule(parse_traffic(f"poisson:{rate:.1f}"), 20.0, seed=0)
    alone = summarize(simulate(schedule, policy, model, seed=0))
    runs = summarize(simulate(schedule, policy, model, seed=0, slow_stretches=True))
    assert runs["latency_ms"]["p99"] > 1.5 * alone["latency_ms"]["p99"]
    assert runs["latency_ms"]["p50"] < 1.5 * alone["latency_ms"]["p50"]


def test_what_if_answers_with_stretches_when_asked() -> None:
    from engine.serve.sim.what_if import Question, answer

    fitted = SlowStretches.fit([chain(40_000, 0.004, 0.05, 3)])
    samples = {n: 0.001 * n**0.8 * chain(4000, 0.004, 0.05, 4) for n in (1, 2, 4, 8)}
    model = ServiceModel(samples, {}, stretches=fitted)
    spec = parse_traffic(f"poisson:{0.6 * model.capacity(8):.1f}")
    policy = BatchPolicy(max_batch=8, delay_ms=2.0)
    alone = answer(Question(spec, policy, None), model)["prediction"]
    runs = answer(Question(spec, policy, None, slow_stretches=True), model)["prediction"]
    assert runs["latency_ms"]["p99"] > alone["latency_ms"]["p99"]
    said = answer(Question(spec, policy, None, slow_stretches=True), model)["stretches"]
    assert said.startswith("slow stretches as calibrated: ")  # the window shows it


def test_simulate_with_slow_stretches_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh calibration fits the process; `--slow-stretches` draws from it and says so."""
    import json

    from tests.conftest import DEMO_CNN
    from tests.test_cli import opscope

    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "s.json"
    done = opscope("simulate", DEMO_CNN, "--traffic", "poisson:300", "--requests", "500",
                   "--max-batch", "2", "--threads", "1", "--slow-stretches", "--json", out,
                   check=True)  # fmt: skip
    r = json.loads(out.read_text())
    st = r["calibration"]["slow_stretches"]
    assert r["slow_stretches"] is bool(st)
    if st:  # a machine whose batches never ran 1.3x their median has none
        assert 0 < st["slow_share"] < 1 and st["mean_batches"] >= 1
        assert 0 <= st["left_out"] <= st["windows"] // 3 + 1
        assert "slow stretches as calibrated" in done.stdout
    else:
        assert "no slow stretch in the calibration" in done.stdout
    refused = opscope("simulate", DEMO_CNN, "--llm", "--slow-stretches")
    assert refused.returncode == 2 and "--slow-stretches" in refused.stderr
