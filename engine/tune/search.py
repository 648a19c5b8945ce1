"""The search: every config (exhaustive), or optuna's TPE sampler within a budget, each
trial run for real; then the Pareto fronts and the best config that meets the floor."""

from __future__ import annotations

import dataclasses
import math
import random
import warnings
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Protocol

from engine.config import RunConfig
from engine.events import Event, Notice, Progress
from engine.tune.design import (
    Design,
    Key,
    from_params,
    neighbours,
    ordinal_knobs,
    predictor,
    spread_start,
    to_params,
)
from engine.tune.pareto import front
from engine.tune.space import Space, expand, size
from engine.tune.trial import Trial

OBJECTIVES = ("p50", "p99", "throughput")


@dataclass(frozen=True)
class Goal:
    objective: str  # p50 | p99 (lower is better) | throughput (higher is better)
    min_cosine: float
    slo_p99_ms: float | None = None

    def feasible(self, t: Trial) -> bool:
        if t.status != "ok" or not math.isfinite(t.metric(self.objective)):
            return False
        if not t.cosine >= self.min_cosine:
            return False
        return self.slo_p99_ms is None or t.p99_ms <= self.slo_p99_ms

    def loss(self, t: Trial) -> float:
        """Lower is better."""
        value = t.metric(self.objective)
        return -value if self.objective == "throughput" else value


@dataclass
class TuneResult:
    trials: list[Trial]
    best: Trial | None
    pareto_latency_accuracy: list[int]  # trial numbers: p50 down, cosine up
    pareto_throughput_p99: list[int]  # trial numbers: throughput up, p99 down
    searched: str  # "exhaustive" | "optuna TPE (S spread, R near the best), budget N of M"
    space_size: int
    # how `best` was picked: the best trials re-checked side by side (recheck.py's JSON),
    # or None (the best trial by its own timing: one feasible, or no re-check)
    pick: dict[str, Any] | None = None


RunTrial = Callable[[int, RunConfig], Trial]
# the best feasible trials (best first) -> which one to pick (an index into them) and how
# it was decided (JSON with "pick_index" and "line"), or None: keep the best by trial
Recheck = Callable[[list[Trial], "Goal"], Generator[Event, None, dict[str, Any] | None]]


class Trials(Protocol):
    """Where trials run: `slots` at a time; `next_done` blocks until one ends."""

    @property
    def slots(self) -> int: ...

    def submit(self, number: int, config: RunConfig) -> None: ...

    def next_done(self) -> Trial: ...


class LocalTrials:
    """One trial at a time on this machine, run when its result is asked for."""

    slots = 1

    def __init__(self, run: RunTrial) -> None:
        self._run = run
        self._queued: list[tuple[int, RunConfig]] = []

    def submit(self, number: int, config: RunConfig) -> None:
        self._queued.append((number, config))

    def next_done(self) -> Trial:
        return self._run(*self._queued.pop(0))


def tune(
    space: Space,
    base: RunConfig,
    goal: Goal,
    run: RunTrial | Trials,
    budget: int | None = None,
    seed: int = 0,
    design: Design | None = None,
    recheck: Recheck | None = None,
) -> Generator[Event | Trial, None, TuneResult]:
    """Yields progress and each trial as it ends; returns the result. Without a budget (or
    with one that covers the space) every config runs, in order. `run` runs one trial, or
    is a pool of `slots` places (a Ray cluster) that runs several at once. `recheck` times
    the best few feasible trials side by side and picks among them."""
    trials_at: Trials = LocalTrials(run) if callable(run) else run
    configs = expand(space, base)
    n = len(configs)
    trials: list[Trial] = []
    if budget is None or budget >= n:
        yield from _every(configs, trials_at, trials)
        how = "exhaustive"
    else:
        design = design or Design()
        yield from _optuna(space, base, goal, trials_at, budget, seed, trials, design)
        spread, refine = design.counts(budget)
        how = f"optuna {'TPE' if design.sampler == 'tpe' else design.sampler}"
        if spread or refine:
            how += f" ({spread} spread, {refine} near the best)"
        how += f", budget {budget} of {n}"
    trials.sort(key=lambda t: t.number)
    result = tune_result(trials, goal, how, size(space))
    if recheck is not None:
        yield from recheck_pick(result, goal, recheck)
    return result


def top_trials(trials: list[Trial], goal: Goal, n: int) -> list[Trial]:
    """The `n` best feasible trials, best first (by their own timing)."""
    feasible = [t for t in trials if t.status == "ok" and goal.feasible(t)]
    return sorted(feasible, key=lambda t: (goal.loss(t), t.number))[:n]


def recheck_pick(
    result: TuneResult, goal: Goal, recheck: Recheck, n: int = 3
) -> Generator[Event, None, None]:
    """`result.best` from the best `n` feasible trials re-checked side by side (its line a
    Notice); unchanged when fewer than two are feasible or the re-check gives no answer."""
    top = top_trials(result.trials, goal, n)
    if len(top) < 2:
        return
    said = yield from recheck(top, goal)
    index = said.get("pick_index") if said else None
    if said is None or not isinstance(index, int) or not 0 <= index < len(top):
        return
    result.best = top[index]
    result.pick = said
    if said.get("line"):
        yield Notice("info", f"tune {said['line']}")


def _every(
    configs: list[RunConfig], at: Trials, trials: list[Trial]
) -> Generator[Event | Trial, None, None]:
    n, submitted = len(configs), 0
    while len(trials) < n:
        while submitted < n and submitted - len(trials) < at.slots:
            config = configs[submitted]
            yield Progress(
                "tune", len(trials), n, f"trial {submitted + 1}/{n}: {config.short_label()}"
            )
            at.submit(submitted + 1, config)
            submitted += 1
        trial = at.next_done()
        trials.append(trial)
        yield trial


def _optuna(
    space: Space,
    base: RunConfig,
    goal: Goal,
    at: Trials,
    budget: int,
    seed: int,
    trials: list[Trial],
    design: Design,
) -> Generator[Event | Trial, None, None]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    knobs = list(space)
    ordered = ordinal_knobs(space) if design.ordinal else set()
    # an ordered knob is its value's rank; a category its value's index (choices must be
    # plain JSON values; indices keep bools and ints exact)
    dists: dict[str, optuna.distributions.BaseDistribution] = {
        k: optuna.distributions.IntDistribution(0, len(space[k]) - 1)
        if k in ordered
        else optuna.distributions.CategoricalDistribution(list(range(len(space[k]))))
        for k in knobs
    }
    # constraints (the accuracy floor, the SLO) are set on each trial (set_constraint):
    # TPE then prefers configs that meet them; with trials in parallel, the constant liar
    # keeps it from proposing what is already running
    sampler: optuna.samplers.BaseSampler
    if design.sampler == "random":
        sampler = optuna.samplers.RandomSampler(seed=seed)
    else:
        startup = design.startup if design.startup is not None else max(2, min(budget // 2, 5))
        with warnings.catch_warnings():  # multivariate and group: "experimental" in optuna
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = optuna.samplers.TPESampler(
                seed=seed,
                n_startup_trials=startup,
                multivariate=design.multivariate,
                group=design.multivariate,
                constant_liar=at.slots > 1,
            )
    study = optuna.create_study(direction="minimize", sampler=sampler)
    seen: dict[Key, Trial] = {}
    running: dict[int, tuple[Any, Key]] = {}  # trial number -> (optuna trial, key)
    rng = random.Random(seed)
    spread, refine = design.counts(budget)
    start = spread_start(space, ordered, spread, set(), rng)
    asks = repeats = submitted = 0
    total = size(space)
    while True:
        while (
            submitted < budget
            and len(seen) + len(running) < total
            and len(running) < at.slots
            and asks < 50 * budget
        ):
            asks += 1
            taken = set(seen) | {key for _, key in running.values()}
            chosen = _chosen(space, ordered, goal, refine, design.near_top, budget, submitted,
                             start, seen, taken)  # fmt: skip
            if chosen is None and repeats >= 3:
                # TPE keeps proposing configs already run: an untried one next
                chosen = _untried(space, knobs, taken, rng)
            if chosen is not None:
                study.enqueue_trial(to_params(space, ordered, chosen))
                repeats = 0
            ft = study.ask(dists)
            key = from_params(space, ordered, ft.params)
            if key in taken:  # its result again (optuna learns), no new run
                if key in seen:
                    _tell(study, ft, seen[key], goal)
                else:
                    study.tell(ft, state=optuna.trial.TrialState.FAIL)
                repeats += 1
                continue
            repeats = 0
            values = {k: space[k][i] for k, i in zip(knobs, key, strict=True)}
            config = dataclasses.replace(base, **values)
            submitted += 1
            yield Progress(
                "tune", len(trials), budget, f"trial {submitted}/{budget}: {config.short_label()}"
            )
            at.submit(submitted, config)
            running[submitted] = (ft, key)
        if not running:
            break
        trial = at.next_done()
        ft, key = running.pop(trial.number)
        trials.append(trial)
        seen[key] = trial
        _tell(study, ft, trial, goal)
        yield trial
    if len(trials) < budget and len(seen) < total:
        yield Notice("info", f"the search stopped after {len(trials)} trials")


def _chosen(
    space: Space,
    ordered: set[str],
    goal: Goal,
    refine: int,
    near_top: int,
    budget: int,
    submitted: int,
    start: list[Key],
    seen: dict[Key, Trial],
    taken: set[Key],
) -> Key | None:
    """The config the design picks itself (a spread start, then in the last `refine`
    trials the likeliest untried neighbour of the `near_top` best feasible configs that
    have one), or None: the sampler's turn."""
    if submitted < len(start) and start[submitted] not in taken:
        return start[submitted]
    if submitted < budget - refine:
        return None
    feasible = [(goal.loss(t), key) for key, t in seen.items() if goal.feasible(t)]
    pool: list[Key] = []
    tops = 0
    for best in sorted(feasible):  # the best ones with an untried neighbour
        near = [k for k in neighbours(space, ordered, best[1]) if k not in taken]
        if near:
            pool += [k for k in near if k not in pool]
            tops += 1
            if tops >= near_top:
                break
    return min(pool, key=predictor(space, ordered, seen, goal)) if pool else None


def _tell(study: Any, ft: Any, trial: Trial, goal: Goal) -> None:
    import optuna

    if trial.status != "ok" or not math.isfinite(goal.loss(trial)):
        study.tell(ft, state=optuna.trial.TrialState.FAIL)
        return
    violation = max(0.0, goal.min_cosine - trial.cosine) * 1e3
    if goal.slo_p99_ms is not None and math.isfinite(trial.p99_ms):
        violation += max(0.0, trial.p99_ms - goal.slo_p99_ms)
    ft.set_constraint("floor", violation)
    study.tell(ft, goal.loss(trial))


def _untried(space: Space, knobs: list[str], taken: set[Key], rng: random.Random) -> Key:
    import itertools

    left = [k for k in itertools.product(*(range(len(space[k])) for k in knobs)) if k not in taken]
    return rng.choice(left)


def tune_result(trials: list[Trial], goal: Goal, how: str, space_size: int) -> TuneResult:
    """The fronts and the best of `trials` (all of a search, or those done before Ctrl+C)."""
    ok = [t for t in trials if t.status == "ok"]
    lat_acc = front([(t.p50_ms, t.cosine) for t in ok], [False, True])
    tp_p99 = front([(t.samples_per_s, t.p99_ms) for t in ok], [True, False])
    feasible = [t for t in ok if goal.feasible(t)]
    best = min(feasible, key=goal.loss) if feasible else None
    return TuneResult(
        trials,
        best,
        [ok[i].number for i in lat_acc],
        [ok[i].number for i in tp_p99],
        how,
        space_size,
    )
