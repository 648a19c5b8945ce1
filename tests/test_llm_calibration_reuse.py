"""The LLM calibration on the demo LLM: kept by model, config and machine and reused
("LLM calibration from <date>, reused"), only the points a study lacks measured, a
cancelled calibration keeping its rounds for the next, progress with the time left."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.cache import cache_root
from engine.config import RunConfig
from engine.events import Notice, Progress
from engine.serve.llm import calibrate as llm_calibration
from engine.serve.llm.cal_plan import Needs, plan_points
from engine.serve.llm.calibrate import llm_calibration_context, load_or_calibrate_llm
from engine.serve.llm.cost import LLMCost
from engine.serve.sim.calibration_file import calibration_path

SMALL = Needs(64, 2, 0)  # a short study: the demo LLM's points take a few seconds


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPSCOPE_CACHE_DIR", str(tmp_path / "cache"))


def run(llm: Path, needs: Needs = SMALL, threads: int = 1, remeasure: bool = False,
        ) -> tuple[list[Any], LLMCost]:  # fmt: skip
    gen = load_or_calibrate_llm(str(llm), RunConfig(threads=threads), remeasure, needs,
                                fixed_rounds=1)  # fmt: skip
    events: list[Any] = []
    while True:
        try:
            events.append(next(gen))
        except StopIteration as stop:
            return events, stop.value


def measured(events: list[Any]) -> list[str]:
    """The points a calibration measured, from its progress lines."""
    return [ev.message.split(", round")[0] for ev in events
            if isinstance(ev, Progress) and ev.stage == "calibration"]  # fmt: skip


def said(events: list[Any]) -> str:
    return "\n".join(ev.message for ev in events if isinstance(ev, Notice))


def test_a_calibration_is_kept_and_reused_by_model_config_and_machine(
    llm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, cost = run(llm)
    plan = [p.key for p in plan_points(SMALL, 2048, 1)]
    assert measured(first) == plan  # every point the plan names, once (fixed_rounds=1)
    assert "LLM calibration measured in" in said(first) and "the machine was" in said(first)
    assert cost.points["fit_residual"]["prefill"] >= 0 and cost.points["spread"]
    # progress carries the seconds left once a round is timed (none before)
    steps = [ev for ev in first if isinstance(ev, Progress) and ev.stage == "calibration"]
    assert steps[0].total is None and "estimating" in steps[0].message
    assert all(ev.total is not None and ev.total >= ev.done for ev in steps[1:])
    assert all("; about " in ev.message and ev.message.endswith(" left") for ev in steps[1:])
    again, reused = run(llm)
    assert measured(again) == []  # nothing measured: the kept rounds
    assert "LLM calibration from 20" in said(again) and ", reused (" in said(again)
    assert reused.to_json()["prefill_fit"] == cost.to_json()["prefill_fit"]
    # another thread count: its own calibration; another machine: another key
    assert measured(run(llm, threads=2)[0]) == plan
    config = RunConfig(threads=1)
    here = llm_calibration_context(str(llm), config, "CPUExecutionProvider")
    monkeypatch.setattr(llm_calibration, "machine_key", lambda: {"cpu": "another CPU"})
    there = llm_calibration_context(str(llm), config, "CPUExecutionProvider")
    assert here != there and here["model_sha256"] == there["model_sha256"]
    assert calibration_path(here, "llm-") != calibration_path(there, "llm-")


def test_a_longer_study_measures_only_the_points_it_lacks(llm: Path) -> None:
    run(llm)
    longer = Needs(128, 2, 0)
    events, cost = run(llm, longer)
    new = [p.key for p in plan_points(longer, 2048, 1)
           if p.key not in {q.key for q in plan_points(SMALL, 2048, 1)}]  # fmt: skip
    assert new and measured(events) == new  # prefill 128, decode 1x...: not the rest
    assert f"reused for {len(plan_points(longer, 2048, 1)) - len(new)} of" in said(events)
    assert set(cost.points["prefill_ms"]) == {"16", "32", "64", "128"}


def test_a_cancelled_calibration_keeps_what_it_measured(llm: Path) -> None:
    """Ctrl+C at a progress point: the rounds finished are on disk, the interruption says
    so, and the next calibration measures only the rest."""
    gen = load_or_calibrate_llm(str(llm), RunConfig(threads=1), False, SMALL, fixed_rounds=1)
    seen = []
    for ev in gen:
        if isinstance(ev, Progress) and ev.stage == "calibration":
            seen.append(ev.message.split(", round")[0])
            if len(seen) == 6:
                break
    with pytest.raises(KeyboardInterrupt) as stopped:
        gen.throw(KeyboardInterrupt())
    assert "calibration stopped: 5 rounds of" in " ".join(stopped.value.__notes__)
    (path,) = (cache_root() / "calibration").glob("llm-*.json")
    kept = json.loads(path.read_text())["points"]
    assert sorted(kept) == sorted(seen[:5])  # the sixth was cut before it ran
    events, _ = run(llm)
    plan = [p.key for p in plan_points(SMALL, 2048, 1)]
    assert measured(events) == plan[5:]
    assert f"reused for 5 of {len(plan)} points (5 rounds kept); measuring {len(plan) - 5}" in (
        said(events)
    )


def test_a_reused_calibration_off_the_engine_now_says_how_to_measure_again(llm: Path) -> None:
    """The kept rounds made to look fifty times as fast: the reuse checks decode steps now
    and says, in one line, to measure again the way its user can (the window: its button,
    not the command line's flag)."""
    run(llm)
    (path,) = (cache_root() / "calibration").glob("llm-*.json")
    data = json.loads(path.read_text())
    for entry in data["points"].values():
        for rnd in entry["rounds"]:
            if isinstance(rnd["ms"], list):  # the passes' own times (not the extras')
                rnd["ms"] = [x / 50 for x in rnd["ms"]]
    path.write_text(json.dumps(data))
    gen = load_or_calibrate_llm(str(llm), RunConfig(threads=1), False, SMALL,
                                "the Measure again button", fixed_rounds=1)  # fmt: skip
    warned = [ev.message for ev in gen if isinstance(ev, Notice) and ev.level == "warning"]
    assert len(warned) == 1 and "decode steps now take" in warned[0]
    assert warned[0].endswith("measure again with the Measure again button")
    assert "--recalibrate" not in warned[0]
    # measured again, as asked: every point, and the new rounds agree with the engine
    events, _ = run(llm, remeasure=True)
    assert measured(events) == [p.key for p in plan_points(SMALL, 2048, 1)]
    assert "measured in" in said(events)
