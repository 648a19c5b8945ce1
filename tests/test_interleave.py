"""engine/measure/interleave.py: ranking by interleaved rounds, on fake clocks whose
candidates cost known times (no real timing: never an absolute speed threshold)."""

from __future__ import annotations

from collections.abc import Callable, Generator

import pytest

from engine.measure.contention import Contention
from engine.measure.interleave import Ranking, Timed, honest_clock, rank


class Machine:
    """Fake wall and CPU clocks: a call costs its candidate's CPU time, stretched on the
    wall by the machine's load at that moment (`load(t)`, 1.0: quiet)."""

    def __init__(self, load: Callable[[float], float] = lambda t: 1.0) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self.load = load
        self.calls: list[str] = []

    def candidate(self, name: str, cost_s: float | Callable[[int], float]) -> Timed:
        n = [0]

        def run() -> None:
            cost = cost_s(n[0]) if callable(cost_s) else cost_s
            n[0] += 1
            self.calls.append(name)
            self.cpu += cost
            self.wall += cost * self.load(self.wall)

        return Timed(name, run)


def drive(gen: Generator[str, None, Ranking]) -> Ranking:
    while True:
        try:
            next(gen)
        except StopIteration as stop:
            out: Ranking = stop.value
            return out


def ranked(m: Machine, cands: list[Timed], **kw: object) -> Ranking:
    kw.setdefault("window", None)
    return drive(rank(cands, wall_clock=lambda: m.wall, cpu_clock=lambda: m.cpu, **kw))  # type: ignore[arg-type]


def test_a_clear_winner_is_picked_with_its_ratio_over_the_next() -> None:
    m = Machine()
    r = ranked(m, [m.candidate("a", 0.002), m.candidate("b", 0.001), m.candidate("c", 0.003)])
    assert r.decision == "clear" and r.pick == 1
    assert r.next_name == "a"
    assert r.ratio == pytest.approx(2.0)
    assert r.ratio_spread == pytest.approx((2.0, 2.0))
    assert not r.rechecked and r.rounds == 3
    assert [s.name for s in r.standings] == ["b", "a", "c"]
    assert r.by_index(1).median == pytest.approx(1.0)  # ms per call
    assert "picked b: 2.00x [2.00-2.00] over a, 3 interleaved rounds" in r.line()


def test_rounds_rotate_the_order() -> None:
    m = Machine()
    ranked(m, [m.candidate(x, 0.01) for x in "abc"], window_s=0.0, min_calls=1, warmup=0,
           min_gain=-1.0)  # fmt: skip
    assert m.calls[:9] == list("abcbcacab")


def test_a_burst_of_load_does_not_decide() -> None:
    """b is 20% faster, but a burst triples the wall time of whatever runs in the first
    second: timed once each, in order (b in the burst), a looks faster; interleaved
    rounds pick b."""

    def load(t: float) -> float:
        return 3.0 if 0.3 <= t < 1.3 else 1.0

    m = Machine(load)
    a, b = m.candidate("a", 0.012), m.candidate("b", 0.010)
    r = ranked(m, [a, b], window_s=0.3, rounds=5)
    assert r.by_index(0).rounds[0] < r.by_index(1).rounds[0]  # the first round is fooled
    assert r.pick == 1 and r.decision == "clear"


def test_the_cpu_clock_sees_through_load_on_the_wall() -> None:
    """Others' load that stretches only b's turns misleads the wall clock every round;
    CPU time (what each call cost this process) still ranks b first."""

    def candidates(m: Machine) -> list[Timed]:
        def cost(name: str, s: float) -> Callable[[int], float]:
            def at(n: int) -> float:
                m.load = (lambda t: 2.0) if name == "b" else (lambda t: 1.0)
                return s

            return at

        return [m.candidate("a", cost("a", 0.012)), m.candidate("b", cost("b", 0.010))]

    m = Machine()
    assert ranked(m, candidates(m)).pick == 0  # the wall clock is fooled
    m = Machine()
    r = ranked(m, candidates(m), clock="cpu")
    assert r.pick == 1 and r.clock == "cpu"
    assert r.by_index(1).other_median > r.by_index(1).median  # the wall clock kept too


def test_a_close_call_is_rechecked_and_stays_a_tie_for_the_first_listed() -> None:
    """b is 0.5% faster with noise either way: re-checked up to the most rounds, then a
    tie, which goes to the candidate listed first; a clearly slower c leaves the re-check."""
    noise = [1.0, 1.03, 0.98, 1.02, 0.97, 1.01, 0.99, 1.04, 0.96]
    m = Machine()
    cands = [
        m.candidate("a", lambda n: 0.010 * noise[(n // 6) % 9]),
        m.candidate("b", lambda n: 0.00995 * noise[(n // 6 + 4) % 9]),
        m.candidate("c", 0.030),
    ]
    r = ranked(m, cands, window_s=0.05, max_rounds=9)
    assert r.rechecked and r.decision == "tie"
    assert r.pick == 0 and r.tied == [0, 1]
    assert len(r.by_index(0).rounds) == 9 and len(r.by_index(2).rounds) == 3
    assert "a tie with" in r.line() and "listed first" in r.line()


def test_a_close_call_that_separates_on_the_recheck_is_clear() -> None:
    """b is 10% faster except in round 2 (a burst on b): 3 rounds cannot separate them,
    the re-check does."""
    m = Machine()

    def b_cost(n: int) -> float:
        return 0.015 if 6 <= n < 12 else 0.009

    cands = [m.candidate("a", 0.010), m.candidate("b", b_cost)]
    r = ranked(m, cands, window_s=0.05, max_rounds=9)
    assert r.rechecked and r.decision == "clear" and r.pick == 1
    assert r.rounds >= 6


def test_a_lead_below_min_gain_is_a_tie() -> None:
    m = Machine()
    r = ranked(m, [m.candidate("a", 0.0100), m.candidate("b", 0.0099)], max_rounds=4)
    assert r.decision == "tie" and r.pick == 0


def test_a_reference_is_timed_but_never_picked() -> None:
    m = Machine()
    fp32 = Timed("fp32", m.candidate("fp32", 0.001).run_once, reference=True)
    r = ranked(m, [m.candidate("int8", 0.002), fp32])
    assert r.pick == 0 and r.decision == "only"
    assert r.speedup(1)[0] == pytest.approx(0.5)
    assert "the only candidate" in r.line()


def test_per_call_compares_per_sample() -> None:
    m = Machine()
    batch8 = Timed("b8", m.candidate("b8", 0.040).run_once, per_call=8)
    r = ranked(m, [m.candidate("b1", 0.010), batch8])
    assert r.pick == 1 and r.by_index(1).median == pytest.approx(5.0)


def test_contention_of_each_round_is_kept() -> None:
    m = Machine()

    class FakeWindow:
        def done(self) -> Contention:
            return Contention(window_s=1.0, cpus=2, others_cpu=1.5, steal=0.0, own_cpu=1.0)

    r = drive(rank([m.candidate("a", 0.01), m.candidate("b", 0.02)], window=FakeWindow,  # type: ignore[arg-type]
                   wall_clock=lambda: m.wall, cpu_clock=lambda: m.cpu))  # fmt: skip
    assert r.busy_rounds == 3 and r.contention is not None and r.contention.busy
    assert "busy, 3 busy round(s)" in r.line()
    assert r.to_json()["contention"]["verdict"] == "busy"


def test_json_names_the_pick_and_the_standings() -> None:
    m = Machine()
    r = ranked(m, [m.candidate("a", 0.002), m.candidate("b", 0.001)])
    j = r.to_json()
    assert j["pick"] == "b" and j["decision"] == "clear" and j["clock"] == "wall"
    assert [s["name"] for s in j["standings"]] == ["b", "a"]
    assert j["standings"][0]["wall_ms"] == pytest.approx(1.0)


def test_honest_clock() -> None:
    assert honest_clock([2, 2], [False, False])[0] == "cpu"
    assert honest_clock([1, 2], [False, False])[0] == "wall"
    assert honest_clock([2, 2], [True, False])[0] == "wall"


def test_unknown_clock_is_refused() -> None:
    with pytest.raises(ValueError):
        next(rank([], clock="gpu"))
