"""The tuner: the space, the Pareto fronts, the search (exhaustive and optuna within a
budget) with failed trials, and `opscope tune` as a user runs it."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from engine.config import RunConfig
from engine.errors import ConfigError
from engine.events import Notice, drive
from engine.tune.pareto import front
from engine.tune.search import Goal, tune
from engine.tune.space import default_space, expand, parse_space
from engine.tune.trial import Trial
from tests.conftest import DEMO_CNN
from tests.in_process import Cli
from tests.test_child_job_warm import marking_job  # a trial's stand-in
from tests.test_cli import opscope


def test_pareto_front() -> None:
    # (p50 lower better, cosine higher better)
    pts = [(1.0, 0.99), (2.0, 1.0), (1.5, 0.98), (0.5, 0.90), (3.0, 1.0), (math.nan, 1.0)]
    assert front(pts, [False, True]) == [0, 1, 3]


def test_space_parsing_and_its_errors() -> None:
    space = parse_space(["precision=fp32,int8-dynamic", "batch=1,8", "spinning=on,off"])
    assert space == {"precision": ["fp32", "int8-dynamic"], "batch": [1, 8],
                     "spinning": [True, False]}  # fmt: skip
    assert len(expand(space, RunConfig())) == 8
    for bad, said in (
        (["color=red"], "unknown knob 'color'"),
        (["batch=0"], "batch must be 1 or more"),
        (["batch=two"], "whole numbers"),
        (["precision"], "expected KNOB=V1,V2"),
        (["engine=tensorflow"], "unknown engine 'tensorflow'"),
    ):
        with pytest.raises(ConfigError, match=said):
            parse_space(bad)
    with pytest.raises(ConfigError, match="precision must be one of"):
        expand({"precision": ["int4"]}, RunConfig())
    with pytest.raises(ConfigError, match="has no precision bf16"):
        expand({"precision": ["bf16"]}, RunConfig())
    assert default_space(RunConfig()) == {
        "precision": ["fp32", "int8-dynamic", "int8-static"], "fusion": ["basic", "all"]
    }  # fmt: skip


def _fake_run(costs: dict[tuple[str, str], tuple[float, float]], fail: set[tuple[str, str]]):  # type: ignore[no-untyped-def]
    ran: list[RunConfig] = []

    def run(number: int, config: RunConfig) -> Trial:
        ran.append(config)
        key = (config.precision, config.fusion)
        if key in fail:
            return Trial(number, config, status="failed", error="the engine crashed")
        p50, cos = costs[key]
        return Trial(number, config, "ok", p50, p50 * 1.5, 1000 / p50, cos, 100)

    return run, ran


COSTS = {
    ("fp32", "basic"): (2.0, 1.0), ("fp32", "all"): (1.5, 1.0),
    ("int8-dynamic", "basic"): (1.2, 0.995), ("int8-dynamic", "all"): (0.9, 0.995),
    ("int8-static", "basic"): (0.8, 0.95), ("int8-static", "all"): (0.5, 0.95),
}  # fmt: skip


def test_exhaustive_tune_takes_the_fastest_trial_that_meets_the_floor() -> None:
    run, ran = _fake_run(COSTS, {("fp32", "basic")})
    space = default_space(RunConfig())
    result = drive(tune(space, RunConfig(), Goal("p50", 0.99), run))
    assert len(result.trials) == 6 and len(ran) == 6 and result.searched == "exhaustive"
    assert result.trials[0].status == "failed"  # recorded, and the tune went on
    assert result.best.config.precision == "int8-dynamic" and result.best.config.fusion == "all"
    # the static INT8 trials are faster but below the floor: on the latency x accuracy front
    assert {5, 6} & set(result.pareto_latency_accuracy)
    for n in result.pareto_latency_accuracy:  # non-dominated
        t = result.trials[n - 1]
        assert not any(
            o.status == "ok" and o.p50_ms <= t.p50_ms and o.cosine >= t.cosine
            and (o.p50_ms < t.p50_ms or o.cosine > t.cosine) for o in result.trials
        )  # fmt: skip


def test_a_budget_runs_at_most_that_many_trials_with_optuna() -> None:
    run, ran = _fake_run(COSTS, set())
    space = {**default_space(RunConfig()), "batch": [1, 2, 4]}
    result = drive(tune(space, RunConfig(), Goal("p50", 0.99), run, budget=5, seed=1))
    assert len(ran) == len(result.trials) <= 5 and "optuna" in result.searched
    assert len({(c.precision, c.fusion, c.batch) for c in ran}) == len(ran)  # no repeats


def test_tune_from_the_command_line(tmp_path: Path, cli: Cli) -> None:
    """The trials as they ran (--no-recheck: the side-by-side re-check of the best trials
    is tests/test_tune_recheck.py's, one real re-check rather than three in the suite)."""
    out, session = tmp_path / "tune.json", tmp_path / "t.opscope"
    proc = opscope("tune", DEMO_CNN, "--space", "precision=fp32,int8-dynamic",
                   "--space", "fusion=basic,all", "--duration", "0.2", "--threads", "1",
                   "--no-recheck", "--json", out, "--session", session, check=True)  # fmt: skip
    data = json.loads(out.read_text())
    assert len(data["trials"]) == 4 and all(t["status"] == "ok" for t in data["trials"])
    assert data["pareto"]["latency_accuracy"] and data["best"]["command"].startswith(
        "opscope bench "
    )
    assert "--threads 1" in data["best"]["command"] and "best       trial" in proc.stdout
    assert f"recorded   {session} (a bench run per trial)" in proc.stdout
    assert "by its own timing (--no-recheck)" in proc.stdout
    assert data["pick"]["line"].endswith("(--no-recheck)")
    show = opscope("session", "show", session, check=True).stdout
    assert show.count(" bench ") >= 4
    budget = opscope("tune", DEMO_CNN, "--budget", "2", "--duration", "0.2", "--threads", "1",
                     "--no-recheck", "--json", out, check=True)  # fmt: skip
    assert len(json.loads(out.read_text())["trials"]) == 2 and budget.returncode == 0
    broken = tmp_path / "broken.onnx"
    broken.write_text("not a model")
    proc = cli("tune", broken)  # refusals: in this process
    assert proc.returncode == 2 and "not a valid ONNX file" in proc.stderr
    assert "trial" not in proc.stdout  # refused before any trial ran
    bad = cli("tune", DEMO_CNN, "--space", "precision=int4")
    assert bad.returncode == 2 and "int4" in bad.stderr and "Traceback" not in bad.stderr


def test_every_trial_runs_the_inputs_it_was_given_and_its_command_carries_them(
    tmp_path: Path,
) -> None:
    """#29: with the window's Sequence at 256, all trials ran at 1x128 and the best command
    carried no shape. Each trial now runs the given dims and the command says them."""
    from engine.session.store import open_session_file
    from tests.conftest import DEMO_TRANSFORMER

    out, session = tmp_path / "tune.json", tmp_path / "t.opscope"
    opscope("tune", DEMO_TRANSFORMER, "--space", "fusion=basic,all", "--dim", "sequence=48",
            "--duration", "0.2", "--threads", "1", "--json", out, "--session", session,
            check=True)  # fmt: skip
    data = json.loads(out.read_text())
    assert "--dim sequence=48" in data["best"]["command"]
    with open_session_file(session) as reader:
        runs = [r for r in reader.runs() if r.kind == "bench"]
    assert len(runs) == 2
    assert all(r.inputs["input_ids"]["shape"] == [1, 48] for r in runs)


def test_growth_fit_finds_the_exponent() -> None:
    from engine.tune.sweep import SweepPoint, fit

    pts = [
        SweepPoint(n, float(n), 0.1 + 1e-3 * n, 100,
                   {"Softmax": 1e-5 * n * n, "MatMul": 1e-3 * n, "Tiny": 1e-9})
        for n in (64, 128, 256, 512)
    ]  # fmt: skip
    total, growth = fit(pts)
    assert growth["Softmax"] == pytest.approx(2.0, abs=1e-6)
    assert growth["MatMul"] == pytest.approx(1.0, abs=1e-6)
    assert "Tiny" not in growth  # under 1% of the time at every size
    assert 0.5 < total < 1.0


def test_sweep_from_the_command_line(tmp_path: Path) -> None:
    from tests.conftest import DEMO_TRANSFORMER

    out = tmp_path / "sweep.json"
    proc = opscope("sweep", DEMO_TRANSFORMER, "--vary", "sequence=32,64,128",
                   "--duration", "0.3", "--runs", "3", "--threads", "1", "--json", out,
                   check=True)  # fmt: skip
    data = json.loads(out.read_text())
    assert data["vary"] == {"dim": "sequence", "values": [32, 64, 128]}
    assert [p["value"] for p in data["points"]] == [32, 64, 128]
    assert all(p["latency_ms"] > 0 and p["op_types"] for p in data["points"])
    assert data["points"][2]["latency_ms"] > data["points"][0]["latency_ms"]
    assert "Softmax" in data["growth"]["op_types"] and "growth     total" in proc.stdout
    bad = opscope("sweep", DEMO_TRANSFORMER, "--vary", "height=1,2")
    assert bad.returncode == 2 and "no such dim or input (batch, sequence" in bad.stderr
    one = opscope("sweep", DEMO_TRANSFORMER, "--vary", "sequence=64")
    assert one.returncode == 2 and "two values or more" in one.stderr
    shaped = opscope("sweep", DEMO_TRANSFORMER, "--vary", "input_ids=1x16,1x48",
                     "--duration", "0.2", "--runs", "2", "--threads", "1", "--json", out,
                     check=True)  # fmt: skip
    data = json.loads(out.read_text())
    assert [p["value"] for p in data["points"]] == ["1x16", "1x48"] and shaped.returncode == 0


class _OutOfOrderPool:
    """A pool of `slots` places whose trials end in the reverse of their start order (as
    on a cluster of unequal machines): the search must still run each config once."""

    def __init__(self, run, slots: int) -> None:  # type: ignore[no-untyped-def]
        self.slots, self._run, self._started = slots, run, []  # type: ignore[var-annotated]
        self.most_at_once = 0

    def submit(self, number: int, config: RunConfig) -> None:
        self._started.append((number, config))
        self.most_at_once = max(self.most_at_once, len(self._started))

    def next_done(self) -> Trial:
        return self._run(*self._started.pop())


def test_trials_in_parallel_slots_each_config_once_within_the_budget() -> None:
    run, ran = _fake_run(COSTS, {("fp32", "basic")})
    pool = _OutOfOrderPool(run, 3)
    result = drive(tune(default_space(RunConfig()), RunConfig(), Goal("p50", 0.99), pool))
    assert pool.most_at_once == 3 and [t.number for t in result.trials] == [1, 2, 3, 4, 5, 6]
    assert len({(c.precision, c.fusion) for c in ran}) == 6
    assert result.best.config.precision == "int8-dynamic" and result.best.config.fusion == "all"
    run, ran = _fake_run(COSTS, set())
    pool = _OutOfOrderPool(run, 2)
    space = {**default_space(RunConfig()), "batch": [1, 2, 4]}
    result = drive(tune(space, RunConfig(), Goal("p50", 0.99), pool, budget=7, seed=3))
    assert pool.most_at_once == 2 and len(ran) == len(result.trials) <= 7
    assert len({(c.precision, c.fusion, c.batch) for c in ran}) == len(ran)  # no repeats


def _tune_proc(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "app.entry", "tune", str(DEMO_CNN), "--space", "precision=fp32",
         "--space", "batch=1,2,3,4", "--threads", "1", "--session", str(tmp_path / "t.opscope"),
         *args],
        cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True, preexec_fn=_interruptible,
    )  # fmt: skip


def _interruptible() -> None:
    """SIGINT as a terminal's process has it: a test runner started in the background
    inherits it ignored, and Python then installs no Ctrl+C handler in the child."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _trial_child(proc: subprocess.Popen[str], batch: int, within_s: float = 120) -> psutil.Process:
    """The process of the trial at that batch, once it runs: each trial is a job in a
    process of its own (forked from the tune's fork server), one after another in the
    space's order (batch 1, 2, ...)."""
    deadline = time.monotonic() + within_s
    seen: list[int] = []
    while time.monotonic() < deadline:
        for child in psutil.Process(proc.pid).children():
            with contextlib.suppress(psutil.Error):
                cmd = " ".join(child.cmdline())
                # spawned, or forked from the tune's fork server (engine/run/job_start.py)
                if "multiprocessing.forkserver" in cmd:
                    jobs = child.children()
                elif "spawn_main" in cmd:
                    jobs = [child]
                else:
                    jobs = []
                seen += [job.pid for job in jobs if job.pid not in seen]
        if len(seen) >= batch:
            return psutil.Process(seen[batch - 1])
        time.sleep(0.05)
    raise AssertionError(f"no trial at batch {batch} within {within_s} s")


def test_a_trial_killed_mid_run_is_failed_and_the_tune_goes_on(tmp_path: Path) -> None:
    """A real crash of a trial's engine (killed by the OOM killer, say): that trial is
    failed, with why, and the next ones run."""
    out = tmp_path / "t.json"
    # --no-recheck: what comes after the trials is not this test's (test_tune_recheck.py)
    proc = _tune_proc(tmp_path, "--duration", "1", "--no-recheck", "--json", str(out))
    child = _trial_child(proc, batch=2)
    time.sleep(0.5)  # into its run
    child.kill()
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    trials = json.loads(out.read_text())["trials"]
    assert [t["status"] for t in trials] == ["ok", "failed", "ok", "ok"], stdout
    assert "the trial's engine was killed (SIGKILL)" in trials[1]["error"]
    assert "FAILED: the trial's engine was killed" in stdout


def test_ctrl_c_mid_tune_keeps_every_finished_trial(tmp_path: Path) -> None:
    proc = _tune_proc(tmp_path, "--duration", "1")
    _trial_child(proc, batch=3)  # trials 1 and 2 have ended
    time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl+C in a terminal does: the whole group
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "trials finished (in the session)" in stderr
    # the finished trials still answer as far as they went: the best of them, its command
    assert "best       trial " in stdout and "command    opscope bench" in stdout, stdout
    assert "Traceback" not in stderr
    from engine.session.reader import SessionReader

    with SessionReader.open(tmp_path / "t.opscope") as reader:
        runs = reader.runs()
    assert [r.status for r in runs][:2] == ["ok", "ok"] and runs[0].samples > 0
    assert len(runs) <= 3 and all(r.status in ("ok", "cancelled") for r in runs), runs[2:]


def test_the_search_within_a_budget_finds_the_optimum_of_a_monotone_space() -> None:
    """A space whose throughput grows with batch and threads, INT8 static fastest but
    below the floor: the best feasible config is one corner (INT8 dynamic, fusion all,
    the largest batch, the most threads). A budget of 16 of the 120 configs finds it in
    every one of 20 seeds (the search before issue #14's work, categorical TPE: 8 of 20)."""
    speed = {"fp32": 1.0, "int8-dynamic": 1.6, "int8-static": 2.0}

    def run(number: int, c: RunConfig) -> Trial:
        tp = 100 * speed[c.precision] * (1.2 if c.fusion == "all" else 1.0)
        tp *= c.batch**0.3 * c.threads**0.5
        cos = 0.95 if c.precision == "int8-static" else 1.0
        return Trial(number, c, "ok", 1e3 / tp, 2e3 / tp, tp, cos, 100)

    space = {**default_space(RunConfig()), "batch": [4, 1, 16, 2, 8], "threads": [1, 2, 3, 4]}
    missed = []
    for seed in range(20):
        result = drive(tune(space, RunConfig(), Goal("throughput", 0.99), run, 16, seed))
        c = result.best.config
        assert len(result.trials) == 16
        if (c.precision, c.fusion, c.batch, c.threads) != ("int8-dynamic", "all", 16, 4):
            missed.append((seed, c.short_label()))
    assert not missed


def test_neighbours_step_along_sorted_numbers_and_the_spread_start_is_far_apart() -> None:
    import random

    from engine.tune.design import neighbours, ordinal_knobs, spread_start

    space = {"precision": ["fp32", "int8-dynamic"], "batch": [4, 1, 16], "spinning": [1, 0]}
    ordered = ordinal_knobs(space)
    assert ordered == {"batch"}  # two values, or not numbers: a category
    # batch 4 (index 0) sits between 1 and 16; batch 16 at the top has one step down
    assert set(neighbours(space, ordered, (0, 0, 0))) == {
        (1, 0, 0),
        (0, 1, 0),
        (0, 2, 0),
        (0, 0, 1),
    }
    assert set(neighbours(space, ordered, (0, 2, 0))) == {(1, 2, 0), (0, 0, 0), (0, 2, 1)}
    for seed in range(5):
        start = spread_start(space, ordered, 4, set(), random.Random(seed))
        assert len(set(start)) == 4
        first, second = start[0], start[1]
        assert first[0] != second[0] and first[2] != second[2]  # every category differs
        rank = {0: 1, 1: 0, 2: 2}  # batch 4, 1, 16 sorted: 1 < 4 < 16
        r1, r2 = rank[first[1]], rank[second[1]]
        assert abs(r1 - r2) == max(r1, 2 - r1)  # the batch farthest along the range


def test_an_interrupted_trial_is_stopped_with_sigterm_and_waited_for(tmp_path: Path) -> None:
    """Ctrl+C during a trial: the trial's process gets SIGTERM (a bench then marks its run
    cancelled and closes its session) and is waited for; a SIGKILL would leave the run
    `running` and the -wal/-shm behind."""
    import threading

    from engine.run.isolated import run_isolated

    mark = tmp_path / "mark"
    up = Path(f"{mark}.up")

    def interrupt_when_up() -> None:
        while not up.exists():
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    # Ctrl+C as a terminal's process has it (a runner started in the background has it
    # ignored, and the signal below would then do nothing)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt_when_up, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            run_isolated(marking_job, (str(mark),), 60)
    finally:
        signal.signal(signal.SIGINT, before)
    assert mark.read_text() == "term"


def test_a_trial_ends_in_one_line_or_as_a_crash(tmp_path: Path) -> None:
    """What comes back from a job in its own process: its result, its one-line failure,
    a crash (the child killed), or the timeout (then stopped as Ctrl+C would)."""
    from engine.run.isolated import run_isolated

    mark = tmp_path / "mark"
    # a timeout the job outlives, with time to start on a busy machine (it imports this
    # module first: at 2 s the timeout could come before its handler was in place)
    ended = run_isolated(marking_job, (str(mark),), 5.0, grace_s=10)
    assert ended.status == "timeout" and mark.read_text() == "term"
    ended = run_isolated(failing_job, ("no such model",), 60)
    assert (ended.status, ended.error) == ("failed", "no such model")
    ended = run_isolated(crashing_job, (), 60)
    assert ended.status == "crashed" and ended.exitcode == -signal.SIGKILL


def failing_job(why: str) -> Iterator[Notice]:
    yield Notice("info", "starting")
    raise ConfigError(why)


def crashing_job() -> Iterator[Notice]:
    yield Notice("info", "starting")
    os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer, or a native library's crash


def test_a_trial_dies_with_a_killed_tune(tmp_path: Path) -> None:
    """`kill -9` of tune: its trial is told (SIGTERM) and does not outlive it."""

    mark = tmp_path / "mark"
    up = Path(f"{mark}.up")
    parent = subprocess.Popen(
        [sys.executable, "-c", "import sys; from engine.run.isolated import run_isolated; "
         "from tests.test_tune import marking_job; run_isolated(marking_job, (sys.argv[1],), 60)",
         str(mark)],
        cwd=Path(__file__).resolve().parents[1],
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not up.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    parent.send_signal(signal.SIGKILL)
    parent.wait(30)
    while not (mark.exists() and mark.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)  # write_text makes the file before it fills it
    assert mark.read_text() == "term"
