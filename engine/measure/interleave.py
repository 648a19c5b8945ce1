"""Ranking candidates by interleaved repeats, not by one timing each.

On a shared machine one timing of each candidate ranks the moments they were timed in as
much as the candidates (a 3-s trial in a quiet moment beat a faster one timed in a burst).
`rank` times every candidate in rounds whose order rotates (A B C, B C A, C A B, ...), so
drift and bursts of load fall on all alike; each round gives each candidate one value (the
median of a short window of calls); a candidate's figure is the median of its rounds, with
their spread. The leader is chosen only when it separates from every other candidate: in
the rounds, paired (the same round, minutes apart from no one), the other's time over the
leader's stays above 1 across the spread and by at least `MIN_GAIN`. A close call gets more
rounds (the re-check) among the close candidates only; still inseparable, it is a tie, and
the tie goes to the candidate listed first (callers list the simpler or more accurate one
first).

Clocks: "wall" (time.perf_counter) is what a user waits for, and the only honest clock when
candidates differ in threads or thread-pool spinning. "cpu" (time.process_time: every
thread of this process, ONNX Runtime's intra-op pool included) leaves out the time spent
waiting for a CPU someone else holds, so it survives a busy machine better; it is honest
only between candidates that run the same threads without spinning (a spinning pool burns
CPU while it waits, a 2-thread config spends more CPU for less wall time). `honest_clock`
says which applies. Each round also records the other clock and the machine's contention.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.measure.contention import Contention, Window, combine

ROUNDS = 3  # first pass: every candidate this many times
MAX_ROUNDS = 9  # re-checks stop here: a close call still close is a tie
WINDOW_S = 0.3  # each candidate's window per round
MIN_CALLS = 5  # ... and at least this many timed calls in it
WARMUP_CALLS = 1  # untimed calls each time a candidate's turn comes (caches, pools)
MIN_GAIN = 0.02  # a lead under 2% is no reason to choose: a tie


@dataclass(frozen=True)
class Timed:
    """A candidate: a name, one call of it, and how many samples one call serves (its times
    are divided by it, so batches compare per sample). A `reference` (FP32 beside INT8
    variants) is timed in every round for ratios but never picked."""

    name: str
    run_once: Callable[[], object]
    per_call: float = 1.0
    reference: bool = False


@dataclass
class Standing:
    """One candidate's rounds: ms per call (per sample with `per_call`), the ranked clock's
    and the other's."""

    name: str
    index: int  # its place in the list `rank` was given
    rounds: list[float] = field(default_factory=list)  # the ranked clock, one per round
    other: list[float] = field(default_factory=list)  # the other clock, same rounds
    calls: int = 0

    @property
    def median(self) -> float:
        return statistics.median(self.rounds) if self.rounds else math.nan

    @property
    def spread(self) -> tuple[float, float]:
        return spread(self.rounds)

    @property
    def other_median(self) -> float:
        return statistics.median(self.other) if self.other else math.nan

    def to_json(self, clock: str) -> dict[str, Any]:
        lo, hi = self.spread
        other = "cpu" if clock == "wall" else "wall"
        return {
            "name": self.name,
            f"{clock}_ms": _r(self.median),
            f"{clock}_spread_ms": [_r(lo), _r(hi)],
            f"{other}_ms": _r(self.other_median),
            "rounds": len(self.rounds),
            "calls": self.calls,
        }


@dataclass
class Ranking:
    """The standings (fastest first), the pick and why."""

    standings: list[Standing]
    pick: int | None  # index into the list `rank` was given (None: nothing eligible)
    decision: str  # "clear" | "tie" | "only" (one eligible candidate) | "none"
    tied: list[int]  # indices inseparable from the fastest (with it), on a tie
    next_name: str | None  # the fastest other eligible candidate
    ratio: float  # its time over the pick's: median of the paired rounds
    ratio_spread: tuple[float, float]
    rounds: int  # rounds the pick ran (first pass and re-checks)
    rechecked: bool
    clock: str
    contention: Contention | None = None
    busy_rounds: int = 0

    def by_index(self, i: int) -> Standing:
        return next(s for s in self.standings if s.index == i)

    def speedup(self, reference: int) -> tuple[float, float, float]:
        """The reference's time over the pick's (median, spread) from the paired rounds."""
        if self.pick is None:
            return math.nan, math.nan, math.nan
        q = _paired(self.by_index(reference), self.by_index(self.pick))
        lo, hi = spread(q)
        return (statistics.median(q) if q else math.nan), lo, hi

    def line(self) -> str:
        """'picked A: 1.38x [1.31-1.44] over B, 4 interleaved rounds (wall time; quiet)'."""
        if self.pick is None:
            return "nothing to pick"
        name = self.by_index(self.pick).name
        how = f"{self.rounds} interleaved round{'s' if self.rounds != 1 else ''}"
        if self.rechecked:
            how += ", re-checked: a close call"
        where = f"{self.clock} time"
        if self.contention is not None:
            where += f"; {self.contention.verdict}"
            if self.busy_rounds:
                where += f", {self.busy_rounds} busy round(s)"
        if self.decision == "only":
            return f"picked {name}: the only candidate ({where})"
        lo, hi = self.ratio_spread
        if self.decision == "tie":
            return (
                f"picked {name}: a tie with {self.next_name} ({self.ratio:.2f}x "
                f"[{lo:.2f}-{hi:.2f}], inseparable after {how}); listed first, so preferred "
                f"({where})"
            )
        return (
            f"picked {name}: {self.ratio:.2f}x [{lo:.2f}-{hi:.2f}] over {self.next_name}, "
            f"{how} ({where})"
        )

    def to_json(self) -> dict[str, Any]:
        lo, hi = self.ratio_spread
        return {
            "how": "interleaved rounds in rotating order; per round the median of a window; "
            "per candidate the median of its rounds and their range; the pick separates "
            f"from the next across the paired rounds by {MIN_GAIN:.0%} or more, else a "
            "re-check, else a tie that goes to the candidate listed first",
            "clock": self.clock,
            "decision": self.decision,
            "pick": None if self.pick is None else self.by_index(self.pick).name,
            "next": self.next_name,
            "ratio_over_next": _r(self.ratio, 4),
            "ratio_spread": [_r(lo, 4), _r(hi, 4)],
            "tied": [self.by_index(i).name for i in self.tied],
            "rounds": self.rounds,
            "rechecked": self.rechecked,
            "busy_rounds": self.busy_rounds,
            "contention": None if self.contention is None else self.contention.to_json(),
            "standings": [s.to_json(self.clock) for s in self.standings],
            "line": self.line(),
        }


def honest_clock(threads: Sequence[int], spinning: Sequence[bool]) -> tuple[str, str]:
    """("cpu" | "wall", why): CPU time only when every candidate runs the same threads and
    no thread pool spins."""
    if any(spinning):
        return "wall", "a spinning thread pool burns CPU while it waits"
    if len(set(threads)) > 1:
        return "wall", "the candidates run different numbers of threads"
    return "cpu", "same threads, no spinning: CPU time leaves out waiting for others' CPU"


def rank(
    candidates: Sequence[Timed],
    rounds: int = ROUNDS,
    max_rounds: int = MAX_ROUNDS,
    window_s: float = WINDOW_S,
    min_calls: int = MIN_CALLS,
    warmup: int = WARMUP_CALLS,
    clock: str = "wall",
    min_gain: float = MIN_GAIN,
    statistic: Callable[[list[float]], float] = statistics.median,
    wall_clock: Callable[[], float] = time.perf_counter,
    cpu_clock: Callable[[], float] = time.process_time,
    window: Callable[[], Window] | None = Window,
) -> Generator[str, None, Ranking]:
    """Interleaved rounds over `candidates` (listed in order of preference on a tie);
    yields a line per round (a progress and cancellation point), returns the Ranking."""
    if clock not in ("wall", "cpu"):
        raise ValueError(f"clock must be 'wall' or 'cpu', not {clock!r}")
    stands = [Standing(c.name, i) for i, c in enumerate(candidates)]
    eligible = [i for i, c in enumerate(candidates) if not c.reference]
    if len(eligible) <= 1 and len(candidates) <= 1:
        pick = eligible[0] if eligible else None
        return Ranking(stands, pick, "only" if eligible else "none", [], None, math.nan,
                       (math.nan, math.nan), 0, False, clock)  # fmt: skip
    laps: list[Contention] = []
    busy = 0
    done = 0
    active = list(range(len(candidates)))
    references = [i for i, c in enumerate(candidates) if c.reference]
    rechecked = False
    target = max(rounds, 1)
    while True:
        while done < target:
            probe = window() if window is not None else None
            order = active[done % len(active) :] + active[: done % len(active)]
            for i in order:
                _window(candidates[i], stands[i], window_s, min_calls, warmup, clock,
                        statistic, wall_clock, cpu_clock)  # fmt: skip
            lap = probe.done() if probe is not None else None
            if lap is not None:
                laps.append(lap)
                busy += lap.busy
            done += 1
            yield f"round {done} of {'up to ' if target < max_rounds else ''}{max(target, done)}"
        close = _close(stands, [i for i in active if i in eligible], min_gain)
        if len(close) <= 1 or done >= max_rounds:
            break
        # a close call: more rounds, among the close ones (and the references) only
        rechecked = True
        active = sorted(set(close) | set(references))
        target = min(max_rounds, done + max(rounds, 2))
    pool = [i for i in active if i in eligible]
    close = _close(stands, pool, min_gain)
    fastest = min(pool, key=lambda i: stands[i].median)
    pick = min(close) if len(close) > 1 else fastest
    others = [i for i in eligible if i != pick]
    next_i = min(others, key=lambda i: stands[i].median) if others else None
    q = _paired(stands[next_i], stands[pick]) if next_i is not None else []
    decision = "only" if next_i is None else ("tie" if len(close) > 1 else "clear")
    return Ranking(
        standings=sorted(stands, key=lambda s: s.median if s.rounds else math.inf),
        pick=pick,
        decision=decision,
        tied=sorted(close) if len(close) > 1 else [],
        next_name=None if next_i is None else stands[next_i].name,
        ratio=statistics.median(q) if q else math.nan,
        ratio_spread=spread(q),
        rounds=len(stands[pick].rounds),
        rechecked=rechecked,
        clock=clock,
        contention=combine(laps),
        busy_rounds=busy,
    )


def _window(
    c: Timed,
    s: Standing,
    window_s: float,
    min_calls: int,
    warmup: int,
    clock: str,
    statistic: Callable[[list[float]], float],
    wall_clock: Callable[[], float],
    cpu_clock: Callable[[], float],
) -> None:
    """One turn: warm-up calls, then calls until the window and the count are both met."""
    for _ in range(warmup):
        c.run_once()
    wall: list[float] = []
    cpu: list[float] = []
    end = wall_clock() + window_s
    while len(wall) < min_calls or wall_clock() < end:
        w0, c0 = wall_clock(), cpu_clock()
        c.run_once()
        c1, w1 = cpu_clock(), wall_clock()
        wall.append((w1 - w0) * 1e3 / c.per_call)
        cpu.append((c1 - c0) * 1e3 / c.per_call)
    ranked, other = (wall, cpu) if clock == "wall" else (cpu, wall)
    s.rounds.append(float(statistic(ranked)))
    s.other.append(float(statistic(other)))
    s.calls += len(wall)


def _paired(slower: Standing, faster: Standing) -> list[float]:
    """`slower`'s value over `faster`'s, round by round (the rounds both ran, which are
    the first ones: a re-check drops candidates, never adds them)."""
    n = min(len(slower.rounds), len(faster.rounds))
    return [a / b for a, b in zip(slower.rounds[:n], faster.rounds[:n], strict=True) if b > 0]


def _close(stands: list[Standing], pool: list[int], min_gain: float) -> list[int]:
    """The fastest of `pool` and those it does not separate from (see the module)."""
    if not pool:
        return []
    lead = min(pool, key=lambda i: stands[i].median)
    close = [lead]
    for i in pool:
        if i == lead:
            continue
        q = _paired(stands[i], stands[lead])
        lo, _ = spread(q)
        if not q or lo <= 1.0 or statistics.median(q) < 1.0 + min_gain:
            close.append(i)
    return sorted(close)


def spread(values: list[float]) -> tuple[float, float]:
    """The range of the rounds; from 6 rounds on, without the single lowest and highest
    (one burst of load does not make a whole comparison inconclusive)."""
    if not values:
        return math.nan, math.nan
    v = sorted(values)
    if len(v) >= 6:
        v = v[1:-1]
    return v[0], v[-1]


def _r(x: float, digits: int = 4) -> float | None:
    return round(x, digits) if math.isfinite(x) else None
