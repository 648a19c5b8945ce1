"""The tuner's pick comes from its best trials re-checked side by side (#49, item 4): the
trials stay as they ran, the pick is the re-check's, and the output says how it was made."""

from __future__ import annotations

import json
from collections.abc import Generator
from pathlib import Path
from typing import Any

from engine.config import RunConfig
from engine.events import Event, Notice, Progress, drive
from engine.model.workload import Workload
from engine.tune.recheck import RecheckRequest, recheck_job
from engine.tune.search import Goal, top_trials, tune
from engine.tune.space import default_space
from engine.tune.trial import Trial
from tests.conftest import DEMO_CNN
from tests.test_cli import opscope
from tests.test_tune import COSTS, _fake_run


def _fake_recheck(
    pick: int, seen: list[list[int]]
) -> Any:  # re-check that picks `pick` of the top trials
    def recheck(top: list[Trial], goal: Goal) -> Generator[Event, None, dict[str, Any] | None]:
        seen.append([t.number for t in top])
        yield Progress("tune", 0, None, "re-check: round 1 of 3")
        return {"pick_index": pick, "line": f"picked trial {top[pick].number}: 1.36x", "rounds": 3}

    return recheck


def test_the_pick_is_the_rechecks_not_the_fastest_trial() -> None:
    """INT8 static ran 7% behind in its one trial; side by side it is ahead: picked."""
    costs = {**COSTS, ("int8-static", "basic"): (0.95, 0.995)}
    run, _ = _fake_run(costs, set())
    seen: list[list[int]] = []
    events: list[Any] = []
    result = drive(
        tune(default_space(RunConfig()), RunConfig(), Goal("p50", 0.99), run,
             recheck=_fake_recheck(1, seen)),
        events.append,
    )  # fmt: skip
    # the best three feasible by their trials: int8-dynamic all (0.9), int8-static basic
    # (0.95), int8-dynamic basic (1.2); the re-check picks its second
    assert seen == [[4, 5, 3]]
    assert result.best is not None and result.best.number == 5
    assert result.pick is not None and result.pick["rounds"] == 3
    assert any(isinstance(e, Notice) and "tune picked trial 5" in e.message for e in events)
    assert [t.number for t in result.trials] == [1, 2, 3, 4, 5, 6]  # the trials as they ran


def test_no_recheck_with_fewer_than_two_feasible_or_no_answer() -> None:
    run, _ = _fake_run({("fp32", "basic"): (2.0, 1.0), ("fp32", "all"): (1.5, 0.5)}, set())
    seen: list[list[int]] = []
    space = {"precision": ["fp32"], "fusion": ["basic", "all"]}
    result = drive(tune(space, RunConfig(), Goal("p50", 0.99), run,
                        recheck=_fake_recheck(0, seen)))  # fmt: skip
    assert seen == [] and result.best is not None and result.best.number == 1
    assert result.pick is None

    def silent(top: list[Trial], goal: Goal) -> Generator[Event, None, dict[str, Any] | None]:
        yield Notice("warning", "the re-check did not finish")
        return None

    run, _ = _fake_run(COSTS, set())
    result = drive(tune(default_space(RunConfig()), RunConfig(), Goal("p50", 0.99), run,
                        recheck=silent))  # fmt: skip
    assert result.best is not None and result.best.number == 4 and result.pick is None


def test_top_trials_are_feasible_best_first() -> None:
    run, _ = _fake_run(COSTS, {("int8-dynamic", "all")})
    trials = [
        run(i + 1, RunConfig(precision=p, fusion=f))  # type: ignore[arg-type]
        for i, (p, f) in enumerate(COSTS)
    ]
    top = top_trials(trials, Goal("p50", 0.99), 3)
    assert [(t.config.precision, t.config.fusion) for t in top] == [
        ("int8-dynamic", "basic"), ("fp32", "all"), ("fp32", "basic"),
    ]  # fmt: skip
    assert [t.number for t in top_trials(trials, Goal("throughput", 0.99), 2)] == [3, 2]


def test_the_recheck_job_times_real_configs_side_by_side() -> None:
    configs = (RunConfig(fusion="basic", threads=1), RunConfig(fusion="all", threads=1))
    req = RecheckRequest(Workload(str(DEMO_CNN)), configs, ("basic", "all"), "throughput",
                         window_s=0.05)  # fmt: skip
    events: list[Any] = []
    out = drive(recheck_job(req), events.append)
    assert out["pick_index"] in (0, 1) and out["pick"] in ("basic", "all")
    assert out["clock"] == "cpu" and out["per"] == "sample" and out["rounds"] >= 3
    assert {s["name"] for s in out["standings"]} == {"basic", "all"}
    assert out["contention"]["verdict"] in ("quiet", "busy")
    assert out["line"].startswith("picked ")
    assert any(isinstance(e, Progress) and "round 1" in e.message for e in events)


def test_tune_says_how_it_picked(tmp_path: Path) -> None:
    out = tmp_path / "tune.json"
    proc = opscope("tune", DEMO_CNN, "--space", "fusion=basic,all", "--duration", "0.2",
                   "--threads", "1", "--json", out, check=True)  # fmt: skip
    data = json.loads(out.read_text())
    for t in data["trials"]:  # how busy the machine was while each trial ran
        assert t["machine"]["contention"]["verdict"] in ("quiet", "busy")
        assert ("(busy machine)" in proc.stdout) >= (
            t["machine"]["contention"]["verdict"] == "busy"
        )
    pick = data["pick"]
    assert pick["rounds"] >= 3 and pick["clock"] == "cpu"
    assert data["best"]["number"] == int(pick["pick"].split()[1])
    assert (
        f"picked     {pick['line'].removeprefix('picked ')}" in proc.stdout
        and "interleaved round" in pick["line"]
    )
    # --no-recheck's wording: tests/test_tune.py, test_tune_from_the_command_line


def test_a_trial_on_a_busy_machine_says_so() -> None:
    from engine.tune.trial import trial_busy

    t = Trial(1, RunConfig(), "ok", 1.0, 2.0, 1000.0, 1.0, 100)
    assert trial_busy(t) is None
    t.details["machine"] = {"contention": {"verdict": "busy", "line": "busy: others 1.5"}}
    assert trial_busy(t) == "busy: others 1.5"
