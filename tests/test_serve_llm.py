"""The LLM serving simulator: its event loop against hand-computed cases, the properties
the three layouts must show, and goodput's counting (`opscope simulate --llm` end to end:
tests/test_simulate_llm_cli.py)."""

from __future__ import annotations

import dataclasses
import itertools
import json

import numpy as np
import pytest

from engine.errors import ConfigError
from engine.serve.llm.cost import SETTLED, SETTLED_WARMTH, LLMCost, Warmth
from engine.serve.llm.metrics import goodput, summarize_llm
from engine.serve.llm.requests import LLMWorkload, make_workload, parse_length
from engine.serve.llm.sim import LAYOUTS, Layout, simulate_llm
from engine.serve.traffic.schedule import make_schedule, parse_traffic
from tests.conftest import ROOT

DEMO_LLM = ROOT / "resources" / "models" / "demo_llm"
PREFILL_MS, STEP_MS = 50.0, 10.0
# shaped like the demo LLM's calibration on a 2-vCPU machine
MEASURED = LLMCost(0.8, 0.041, 3.0e-5, {1: 0.47, 2: 0.5, 4: 0.7, 8: 1.2}, 72, 0.0004, 2048)


def work(arrivals: list[float], prompt: int = 100, output: int = 11) -> LLMWorkload:
    n = len(arrivals)
    return LLMWorkload(np.asarray(arrivals), np.full(n, prompt), np.full(n, output))


def seeded(rate: float, requests: int, seed: int = 3) -> LLMWorkload:
    schedule = make_schedule(parse_traffic(f"poisson:{rate}"), 0, seed, requests=requests)
    return make_workload(schedule, parse_length("128-1024", "p"), parse_length("64", "n"), seed)


@pytest.mark.parametrize("name", LAYOUTS)
def test_alone_a_request_waits_for_its_prefill_then_one_step_per_token(name: str) -> None:
    cost = LLMCost.constant(PREFILL_MS, STEP_MS)
    book = simulate_llm(work([0.0, 5.0, 10.0]), Layout(name, chunk_tokens=512), cost)
    r = summarize_llm(book)
    assert r["ttft_ms"]["count"] == 3 and r["ttft_ms"]["max"] == pytest.approx(PREFILL_MS)
    assert r["ttft_ms"]["p50"] == pytest.approx(PREFILL_MS)
    assert r["tpot_ms"]["p50"] == pytest.approx(STEP_MS) == r["tpot_ms"]["max"]
    assert r["itl_ms"]["count"] == 30 and r["itl_ms"]["max"] == pytest.approx(STEP_MS)
    assert book.done == pytest.approx([a + 0.05 + 10 * 0.01 for a in (0.0, 5.0, 10.0)])


def test_a_decode_batch_of_k_makes_a_token_per_step_of_k() -> None:
    cost = LLMCost(PREFILL_MS, 0.0, 0.0, {1: 1.0, 4: 4.0}, 0, 0.0)  # 1 ms per sequence
    book = simulate_llm(work([0.0] * 4), Layout("colocated"), cost)
    r = summarize_llm(book)
    assert book.first == pytest.approx([0.05] * 4)  # one pass prefills the four
    assert r["tpot_ms"]["p50"] == pytest.approx(4.0) == r["tpot_ms"]["max"]
    assert r["decode_batch_mean"] == pytest.approx(4.0)


def test_prefill_passes_per_prompt_pay_the_fixed_cost_each() -> None:
    """The real loop prefills each prompt as its own pass: two prompts, two fixed costs."""
    per = dataclasses.replace(LLMCost.constant(PREFILL_MS, STEP_MS), prefill_pass_per_prompt=True)
    assert simulate_llm(work([0.0, 0.0]), Layout("colocated"), per).first == pytest.approx(
        [0.1, 0.1]
    )
    one = simulate_llm(work([0.0, 0.0]), Layout("colocated"), LLMCost.constant(PREFILL_MS, STEP_MS))
    assert one.first == pytest.approx([0.05, 0.05])
    assert LLMCost.from_json(per.to_json()).prefill_pass_per_prompt


def test_the_context_grows_each_step_by_one_token() -> None:
    """A stretch advanced in closed form equals the step-by-step sum."""
    cost = LLMCost(PREFILL_MS, 0.0, 0.0, {1: 1.0, 2: 2.0}, 0, 0.01)  # 10 us per token
    book = simulate_llm(work([0.0], prompt=100, output=21), Layout("colocated"), cost)
    steps = sum(1.0 + 0.01 * (101 + k) for k in range(20))  # contexts 101..120
    assert book.done[0] == pytest.approx(0.05 + steps / 1e3)


def test_decode_steps_after_a_prefill_pay_the_calibrated_extra() -> None:
    """By hand: 100-token prompts; the first decode steps after a prefill pass cost 4, 2,
    1 ms more (interpolated between 50 and 200 tokens), then the plain step again."""
    cost = dataclasses.replace(
        LLMCost.constant(PREFILL_MS, STEP_MS),
        after_prefill_lengths=(50, 200),
        after_prefill_ms=((2.0, 1.0, 0.5), (6.0, 3.0, 1.5)),
    )
    assert cost.after_prefill_extra_ms(100, 0) == pytest.approx(10 / 3)
    assert cost.after_prefill_extra_ms(25, 1) == pytest.approx(0.5)  # below: a share
    assert cost.after_prefill_extra_ms(100, 3) == 0.0
    book = simulate_llm(work([0.0], prompt=200, output=6), Layout("colocated"), cost)
    # prefill-only iteration (no decode there), then steps 0, 1, 2 pay 6, 3, 1.5 ms
    steps = [STEP_MS + 6.0, STEP_MS + 3.0, STEP_MS + 1.5, STEP_MS, STEP_MS]
    assert book.done[0] == pytest.approx((PREFILL_MS + sum(steps)) / 1e3)
    assert LLMCost.from_json(cost.to_json()).after_prefill_ms == cost.after_prefill_ms
    # a mixed iteration: A decoding when B's prompt (200) is prefilled: A's step there is
    # step 0, its next ones steps 1 and 2
    both = simulate_llm(work([0.0, 0.0605], prompt=200, output=6), Layout("colocated"), cost)
    a_steps = [STEP_MS + 6.0, PREFILL_MS + STEP_MS + 6.0, STEP_MS + 3.0, STEP_MS + 1.5, STEP_MS]
    assert both.done[0] == pytest.approx((PREFILL_MS + sum(a_steps)) / 1e3)


def _warming(prompt_rows: tuple[tuple[float, ...], ...]) -> LLMCost:
    """Fixed passes, with extras after a prefill of 100 or 200 tokens (two steps), after a
    pause of 1 or 10 ms (three decode steps; `prompt_rows`: the prompt passes')."""
    return dataclasses.replace(
        LLMCost.constant(PREFILL_MS, STEP_MS),
        after_prefill_lengths=(100, 200),
        after_prefill_ms=((3.0, 1.0), (6.0, 2.0)),
        after_idle_pauses_ms=(1.0, 10.0),
        after_idle_ms=((1.0, 0.5, 0.0), (4.0, 2.0, 2.5)),
        after_idle_prompt_ms=prompt_rows,
    )


def test_the_extras_walk_from_a_pause_through_a_prefill_to_settled() -> None:
    """By hand, the states the simulator and the bench's iteration check both walk: after
    a 50 ms pause a chunked iteration of two prompt passes (150 tokens) and a decode step
    pays the prompt passes' rows 0-1 (7 + 2) and the decode step's step 0 after a 150-token
    prefill (4.5); the next decode-only step the larger of the two extras due; then
    nothing: settled (a decode-only stretch advanced in closed form)."""
    cost = _warming(((3.0, 1.0), (7.0, 2.0)))
    warm = Warmth()
    assert cost.decode_extras_s(warm, 99) == ((), ())  # nothing due
    warm = warm.paused(50.0)
    assert cost.decode_extras_s(warm, 99)[0] == (0.004, 0.002, 0.0025)  # the pause's row
    extra, warm = cost.iteration_extra_ms(warm, 2, 150, decode=True, split=True)
    assert extra == pytest.approx(7.0 + 2.0 + 4.5)
    extra, warm = cost.iteration_extra_ms(warm, 0, 0, decode=True, split=True)
    assert extra == pytest.approx(2.5)  # idle pass 2 (2.5), not prefill step 1 (1.5)
    assert cost.decode_extras_s(warm, 99) == ((), ())  # both rows paid to their ends
    assert cost.iteration_extra_ms(warm, 0, 0, decode=True, split=True)[0] == 0.0
    # a whole prompt after the pause pays the decode steps' step 0 once and warms it
    extra, warm = cost.iteration_extra_ms(Warmth().paused(50.0), 1, 150, False, False)
    assert extra == 4.0 and warm.step == 0 and warm.idle_step >= cost.after_idle_steps


def test_a_settled_state_charges_what_the_state_did() -> None:
    """LLMCost.settle (the simulator keys its lookups on settled states): from every state
    of a walk, the settled one charges the same decode-only extras and the same prompt
    iterations, and states past every row, or after a pause shorter than any calibrated,
    come to one."""
    cost = _warming(((3.0, 1.0, 0.5, 0.2), (7.0, 2.0, 1.0, 0.4)))
    tokens, steps = (0, 150, 400), (0, 1, 2, 7, SETTLED)
    pauses, passes_since = (0.5, 1.0, 3.0, 50.0), (0, 2, 3, 5, SETTLED)
    states = [Warmth(*s) for s in itertools.product(tokens, steps, pauses, passes_since)]
    iterations = list(itertools.product((0, 1, 2), (0, 64), (True, False), (True, False)))
    for w in states:
        got = cost.settle(w)
        assert cost.decode_extras_s(got, 99) == cost.decode_extras_s(w, 99)
        for it in iterations:
            a, b = cost.iteration_extra_ms(w, *it), cost.iteration_extra_ms(got, *it)
            assert a[0] == b[0] and cost.settle(a[1]) == cost.settle(b[1])
    assert cost.settle(Warmth(150, 9, 50.0, 4)) == SETTLED_WARMTH
    assert cost.settle(Warmth(150, 9, 0.5, 0)) == SETTLED_WARMTH  # shorter than any pause
    assert cost.settle(Warmth(150, 9, 3.0, 3)) == Warmth(0, SETTLED, 1.0, 3)  # prompt row


@pytest.mark.parametrize("name", LAYOUTS)
def test_stretches_in_closed_form_equal_the_step_by_step_loop(name: str) -> None:
    """Issue 28, item 5: a simulation that advances decode-only stretches in one event
    (their extras after a prefill or a pause included) books what one that runs every
    decode step as its own event books: each request's first and last token, and the
    inter-token gaps' percentiles, on a seeded Poisson workload at three loads, with one
    instance and with three (arrivals then cut one stretch, the one whose step ends first,
    and what its boundary leaves is offered again)."""
    cost = dataclasses.replace(
        LLMCost.constant(2.0, 0.8),
        prefill_b_ms=0.05,
        prefill_c_ms=1e-4,
        decode_ms={1: 0.8, 4: 0.9, 16: 1.6},
        decode_slope_ms=3e-4,
        kv_bytes_per_token=4096,
        after_prefill_lengths=(16, 64, 256),
        after_prefill_ms=((0.03, 0.01, 0.0), (0.06, 0.02, 0.01), (0.34, 0.22, 0.03)),
        after_idle_pauses_ms=(1.0, 5.0, 20.0),
        after_idle_ms=((0.02, 0.0, 0.0), (0.3, 0.26, 0.01), (0.88, 0.46, 0.11)),
        after_idle_prompt_ms=((0.1, 0.0), (0.5, 0.3), (1.2, 0.8)),
        continuing=(0.2, 0.06, 6e-5, 0.0),
        iteration_ms=0.04,
        idle_start_ms=0.2,
    )
    one = Layout(name, max_seqs=16, chunk_tokens=64, kv_ms_per_mb=0.8)
    three = dataclasses.replace(one, instances=3, prefill_instances=2, decode_instances=3)
    for layout, rate in itertools.product((one, three), (20.0, 60.0, 120.0)):
        schedule = make_schedule(parse_traffic(f"poisson:{rate:g}"), 0, 0, requests=300)
        w = make_workload(schedule, parse_length("16-300", "p"), parse_length("1-40", "n"), 3)
        fast = simulate_llm(w, layout, cost)
        slow = simulate_llm(w, layout, cost, stepwise=True)
        assert fast.first == pytest.approx(slow.first, rel=1e-12, abs=1e-12)
        assert fast.done == pytest.approx(slow.done, rel=1e-12, abs=1e-12)
        assert len(fast.segments()) < len(slow.segments())  # fewer events: stretches were jumped
        a, b = summarize_llm(fast)["itl_ms"], summarize_llm(slow)["itl_ms"]
        assert a["count"] == b["count"]
        for q in ("p50", "p90", "p99", "mean", "max"):
            assert a[q] == pytest.approx(b[q], rel=1e-6)


def test_every_iteration_pays_the_loops_own_work() -> None:
    """By hand: 1 ms of the loop's own work in each iteration, the prefill-only one and
    each decode step (a stretch advanced in closed form pays it per step too)."""
    cost = dataclasses.replace(LLMCost.constant(PREFILL_MS, STEP_MS), iteration_ms=1.0)
    book = simulate_llm(work([0.0], prompt=100, output=6), Layout("colocated"), cost)
    assert book.first[0] == pytest.approx((PREFILL_MS + 1.0) / 1e3)
    assert book.done[0] == pytest.approx((PREFILL_MS + 1.0 + 5 * (STEP_MS + 1.0)) / 1e3)
    # a mixed iteration pays it once: B's prompt prefilled while A decodes
    both = simulate_llm(work([0.0, 0.0615], prompt=100, output=6), Layout("colocated"), cost)
    a_steps = [STEP_MS + 1.0, PREFILL_MS + STEP_MS + 1.0, *[STEP_MS + 1.0] * 3]
    assert both.done[0] == pytest.approx((PREFILL_MS + 1.0 + sum(a_steps)) / 1e3)
    check_json_time(cost, "iteration_ms", 1.0, -1.0)  # absent before calibration 5


def check_json_time(cost: LLMCost, key: str, want: float, bad: float) -> None:
    """A time `key` goes through JSON, is 0 where an older calibration lacks it (none
    charged), and a bad value is refused naming it."""
    back = LLMCost.from_json(json.loads(json.dumps(cost.to_json())))
    assert getattr(back, key) == want
    old = cost.to_json()
    del old[key]
    assert getattr(LLMCost.from_json(old), key) == 0.0
    with pytest.raises(ValueError, match=key):
        LLMCost.from_json({**cost.to_json(), key: bad})


def test_an_idle_engine_starts_new_work_after_its_calibrated_delay() -> None:
    """By hand: an engine that sat idle starts a request 2 ms after it arrives (calibration
    7: the sender's lateness and the engine thread's wake-up), a busy one at its next
    iteration boundary as before; a decode engine woken by a KV landing the same."""
    cost = dataclasses.replace(LLMCost.constant(PREFILL_MS, STEP_MS), idle_start_ms=2.0)
    book = simulate_llm(work([1.0], prompt=100, output=6), Layout("colocated"), cost)
    assert book.first[0] == pytest.approx(1.0 + (2.0 + PREFILL_MS) / 1e3)
    assert book.done[0] == pytest.approx(book.first[0] + 5 * STEP_MS / 1e3)
    # B arrives while A's prompt runs: no delay of its own, it joins at the boundary
    both = simulate_llm(work([1.0, 1.01], prompt=100, output=6), Layout("colocated"), cost)
    assert both.first[1] == pytest.approx(both.first[0] + (PREFILL_MS + STEP_MS) / 1e3)
    disagg = simulate_llm(work([1.0], prompt=100, output=6), Layout("disaggregated"), cost)
    plain = simulate_llm(
        work([1.0], prompt=100, output=6), Layout("disaggregated"),
        dataclasses.replace(cost, idle_start_ms=0.0),
    )  # fmt: skip
    assert disagg.first[0] - plain.first[0] == pytest.approx(2.0 / 1e3)  # the prefill engine
    assert disagg.done[0] - plain.done[0] == pytest.approx(2 * 2.0 / 1e3)  # and the decode
    check_json_time(cost, "idle_start_ms", 2.0, float("nan"))  # absent before calibration 7


def test_the_first_passes_after_an_idle_pause_pay_the_calibrated_extra() -> None:
    """By hand: after a pause of at least 1 ms the first passes cost 1, 0.5 ms more, after
    10 ms or more 4, 2, 1 ms. A prefill pass pays step 0's extra and warms the engine
    again; a decode-only engine (disaggregated) pays them step by step."""
    cost = dataclasses.replace(
        LLMCost.constant(PREFILL_MS, STEP_MS),
        after_idle_pauses_ms=(1.0, 10.0),
        after_idle_ms=((1.0, 0.5, 0.0), (4.0, 2.0, 1.0)),
    )
    assert cost.after_idle_extra_ms(0.5, 0) == 0.0  # shorter than any calibrated pause
    assert cost.after_idle_extra_ms(5.0, 0) == 1.0
    assert cost.after_idle_extra_ms(50.0, 1) == 2.0
    assert cost.after_idle_extra_ms(50.0, 3) == 0.0
    back = LLMCost.from_json(json.loads(json.dumps(cost.to_json())))
    assert (back.after_idle_pauses_ms, back.after_idle_ms) == (
        cost.after_idle_pauses_ms,
        cost.after_idle_ms,
    )
    one = work([1.0], prompt=100, output=6)  # idle since 0: a 1000 ms pause
    colocated = simulate_llm(one, Layout("colocated"), cost)
    assert colocated.first[0] == pytest.approx(1.0 + (PREFILL_MS + 4.0) / 1e3)
    assert colocated.done[0] == pytest.approx(colocated.first[0] + 5 * STEP_MS / 1e3)
    disagg = simulate_llm(one, Layout("disaggregated"), cost)
    assert disagg.first[0] == pytest.approx(1.054)
    steps = [STEP_MS + 4.0, STEP_MS + 2.0, STEP_MS + 1.0, STEP_MS, STEP_MS]
    assert disagg.done[0] == pytest.approx(1.054 + sum(steps) / 1e3)
    busy = simulate_llm(work([0.0005], prompt=100, output=6), Layout("colocated"), cost)
    assert busy.first[0] == pytest.approx(0.0005 + PREFILL_MS / 1e3)  # 0.5 ms: no extra
    # calibration 7: the prompt passes after a pause have extras of their own, pass by
    # pass since the pause (3, 1 ms after 1 ms idle; 7, 2 after 10); decode steps as before
    own = dataclasses.replace(cost, after_idle_prompt_ms=((3.0, 1.0), (7.0, 2.0)))
    assert own.after_idle_prompt_passes_ms(50.0, 0, 1, True) == (7.0, 1)
    assert own.after_idle_prompt_passes_ms(50.0, 0, 3, True) == (9.0, 3)  # 7 + 2 + 0
    assert own.after_idle_prompt_passes_ms(5.0, 1, 1, True) == (1.0, 2)
    assert own.after_idle_prompt_passes_ms(0.5, 0, 2, True) == (0.0, 2)
    assert cost.after_idle_prompt_passes_ms(50.0, 0, 2, True) == (4.0, 1 << 30)  # older
    assert own.after_idle_prompt_passes_ms(50.0, 0, 2, split=False) == (4.0, 1 << 30)  # whole
    colocated = simulate_llm(one, Layout("colocated"), own)  # a whole prompt: as before
    assert colocated.first[0] == pytest.approx(1.0 + (PREFILL_MS + 4.0) / 1e3)
    chunked = simulate_llm(one, Layout("chunked", chunk_tokens=50), own)  # two chunks
    assert chunked.first[0] == pytest.approx(1.0 + (2 * PREFILL_MS + 7.0 + 2.0) / 1e3)
    # its decode steps: the third iteration since the pause pays the decode row's step 2
    steps = [STEP_MS + 1.0, STEP_MS, STEP_MS, STEP_MS, STEP_MS]
    assert chunked.done[0] == pytest.approx(chunked.first[0] + sum(steps) / 1e3)
    back = LLMCost.from_json(json.loads(json.dumps(own.to_json())))
    assert back.after_idle_prompt_ms == ((3.0, 1.0), (7.0, 2.0))
    for bad in ([[1.0]], [[1.0], [-2.0]]):
        data = own.to_json()
        data["after_idle"]["prompt_extra_ms"] = bad
        with pytest.raises(ValueError, match="prompt_extra_ms"):
            LLMCost.from_json(data)


def test_a_prompt_arriving_mid_decode_stalls_the_running_sequence() -> None:
    """By hand: A decodes 0.06, 0.07, 0.08; B arrives at 0.075 and is prefilled in the
    iteration after 0.08 along with A's step (60 ms), then both decode."""
    cost = LLMCost.constant(PREFILL_MS, STEP_MS)
    book = simulate_llm(work([0.0, 0.075]), Layout("colocated"), cost)
    assert book.first == pytest.approx([0.05, 0.14])
    assert book.done == pytest.approx([0.20, 0.24])  # A: 6 steps after 0.14; B: 10
    r = summarize_llm(book)
    assert r["itl_ms"]["max"] == pytest.approx(60.0)
    assert r["tpot_ms"]["max"] == pytest.approx(15.0)  # A: (0.20 - 0.05) / 10


def test_a_chunk_pays_its_scores_against_every_token_so_far_and_reads_the_past() -> None:
    """A prompt in chunks costs what it costs whole in its first chunk; a later chunk of k
    tokens after `done` costs k x (done + k) attention scores (not the (done + k)^2 -
    done^2 of the whole-prompt square, which counted its past twice) and reads the done
    cached tokens at decode's cost per context token."""
    c = MEASURED
    assert c.prefill_chunk_ms(0, 300) == pytest.approx(
        c.prefill_b_ms * 300 + c.prefill_c_ms * 300**2
    )
    later = c.prefill_chunk_ms(896, 64) - c.prefill_chunk_ms(0, 64)
    assert later == pytest.approx(896 * (64 * c.prefill_c_ms + c.decode_slope_ms))
    # chunks of a prompt cost less than the prompt whole (fewer masked scores) plus the
    # past they read
    whole = c.prefill_chunk_ms(0, 1024)
    chunks = sum(c.prefill_chunk_ms(d, 256) for d in range(0, 1024, 256))
    assert chunks < whole + c.decode_slope_ms * (256 + 512 + 768) + 1e-9


def test_a_pass_that_continues_a_prompt_costs_what_its_own_fit_says() -> None:
    """Calibration 6: a later chunk (done > 0) costs a + b*k + c*k*(done + k) + d*done
    from the continuing passes' fit, each pass its own; a whole prompt still costs the
    whole-prompt fit's, and in a chunked engine (calibration 7) a first chunk costs the
    continuing fit's at done 0; without the fit (older calibrations) nothing changes; the
    fit goes through JSON, and a bad one is refused."""
    per_pass = dataclasses.replace(MEASURED, prefill_pass_per_prompt=True)
    fit = (0.4, 0.06, 6e-5, 2e-3)
    c = dataclasses.replace(per_pass, continuing=fit)
    first = per_pass.prefill_a_ms + per_pass.prefill_chunk_ms(0, 64)
    later = 0.4 + 0.06 * 64 + 6e-5 * 64 * (192 + 64) + 2e-3 * 192
    assert c.prefill_pass_ms([(0, 64)]) == pytest.approx(first)
    assert c.prefill_pass_ms([(192, 64)]) == pytest.approx(later)
    assert c.prefill_pass_ms([(0, 64), (192, 64)]) == pytest.approx(first + later)
    assert per_pass.prefill_pass_ms([(192, 64)]) == pytest.approx(
        per_pass.prefill_a_ms + per_pass.prefill_chunk_ms(192, 64)
    )
    split_first = 0.4 + 0.06 * 64 + 6e-5 * 64 * 64
    assert c.prefill_pass_ms([(0, 64), (192, 64)], split=True) == pytest.approx(split_first + later)
    assert per_pass.prefill_pass_ms([(0, 64)], split=True) == pytest.approx(first)
    # the simulator charges it: a 256-token prompt in chunks of 64, alone
    alone = work([0.0], prompt=256, output=1)
    chunked = Layout("chunked", chunk_tokens=64)
    got = simulate_llm(alone, chunked, c).first[0] * 1e3
    want = sum(c.continuing_ms(d, 64) for d in (0, 64, 128, 192))
    assert got == pytest.approx(want)
    whole = simulate_llm(alone, Layout("colocated"), c).first[0] * 1e3  # not chunked
    assert whole == pytest.approx(per_pass.prefill_a_ms + per_pass.prefill_chunk_ms(0, 256))
    old = first + sum(
        per_pass.prefill_a_ms + per_pass.prefill_chunk_ms(d, 64) for d in (64, 128, 192)
    )
    assert simulate_llm(alone, chunked, per_pass).first[0] * 1e3 == pytest.approx(old)
    back = LLMCost.from_json(json.loads(json.dumps(c.to_json())))
    assert back.continuing == pytest.approx(fit)
    assert LLMCost.from_json(per_pass.to_json()).continuing is None  # before calibration 6
    for bad in ({"a_ms": 1.0}, {**c.to_json()["continuing_fit"], "d_ms_per_cached_token": -1}):
        with pytest.raises(ValueError, match="continuing_fit"):
            LLMCost.from_json({**c.to_json(), "continuing_fit": bad})


@pytest.mark.parametrize("split", [False, True])
def test_an_iterations_sums_cost_what_its_passes_cost(split: bool) -> None:
    """`prefill_sums_ms`, which charges the real loop's logged iterations from their sums
    (the bench's check), charges what `prefill_pass_ms` charges the same passes, for every
    kind of calibration: one pass for all, a pass each, and with the continuing fit."""
    per_pass = dataclasses.replace(MEASURED, prefill_pass_per_prompt=True)
    costs = (MEASURED, per_pass, dataclasses.replace(per_pass, continuing=(0.4, 0.06, 6e-5, 2e-3)))
    rng = np.random.default_rng(3)
    for cost in costs:
        for _ in range(20):
            chunks = [(int(rng.choice([0, 64, 300])), int(rng.integers(1, 200)))
                      for _ in range(int(rng.integers(1, 4)))]  # fmt: skip
            later = [(d, k) for d, k in chunks if d]
            got = cost.prefill_sums_ms(
                len(chunks), sum(k for _, k in chunks), sum(k * (d + k) for d, k in chunks),
                sum(d for d, _ in chunks),
                (len(later), sum(k for _, k in later), sum(k * (d + k) for d, k in later)),
                split,
            )  # fmt: skip
            assert got == pytest.approx(cost.prefill_pass_ms(chunks, split)), (cost, chunks)


def test_the_continuing_fit_finds_its_terms_and_keeps_them_non_negative() -> None:
    from engine.measure.fits import fit_continuing

    k = np.asarray([16.0, 32, 64, 128, 256] * 3)
    done = np.repeat([64.0, 256, 512], 5)
    ms = 0.44 + 0.058 * k + 6e-5 * k * (done + k) + 2e-3 * done
    assert fit_continuing(k, done, ms) == pytest.approx((0.44, 0.058, 6e-5, 2e-3), rel=1e-6)
    # no cost from the cached tokens: that term is 0, not negative
    a, b, c, d = fit_continuing(k, done, 0.44 + 0.058 * k - 1e-4 * done + 0.06)
    assert min(a, b, c, d) >= 0


def test_chunked_prefill_bounds_the_stall_that_colocated_suffers() -> None:
    load = seeded(rate=12.0, requests=1500)
    ref = {n: summarize_llm(simulate_llm(load, Layout(n, chunk_tokens=256), MEASURED))
           for n in ("colocated", "chunked")}  # fmt: skip
    colocated, chunked = ref["colocated"]["itl_ms"], ref["chunked"]["itl_ms"]
    assert chunked["max"] < 0.5 * colocated["max"]
    # the worst chunked iteration: one chunk at the end of the longest prompt, and a full
    # decode batch at the longest context
    c, most = MEASURED, 1024 + 64
    chunk = c.prefill_a_ms + c.prefill_chunk_ms(most - 256, 256)
    assert chunked["max"] <= chunk + c.decode_step_ms(64, 64 * most)


def test_disaggregation_adds_the_kv_transfer_to_ttft() -> None:
    cost = LLMCost.constant(PREFILL_MS, STEP_MS, kv_bytes_per_token=10_000)  # 1 MB a prompt
    alone = work([0.0, 5.0])
    fast = summarize_llm(simulate_llm(alone, Layout("disaggregated"), cost))
    slow = summarize_llm(simulate_llm(alone, Layout("disaggregated", kv_ms_per_mb=4.0), cost))
    assert fast["ttft_ms"]["max"] == pytest.approx(PREFILL_MS)
    assert slow["ttft_ms"]["p50"] == pytest.approx(PREFILL_MS + 4.0) == slow["ttft_ms"]["max"]
    assert slow["tpot_ms"]["max"] == pytest.approx(STEP_MS)
    # two prompts prefilled together share one link: the second waits for the first
    both = simulate_llm(work([0.0, 0.0]), Layout("disaggregated", kv_ms_per_mb=4.0), cost)
    assert both.first == pytest.approx([0.054, 0.058])


def test_disaggregation_keeps_decode_steady_while_prompts_arrive() -> None:
    load = seeded(rate=10.0, requests=800)
    colocated = summarize_llm(simulate_llm(load, Layout("colocated", instances=2), MEASURED))
    split = summarize_llm(simulate_llm(load, Layout("disaggregated", kv_ms_per_mb=0.8), MEASURED))
    assert split["itl_ms"]["p99"] < colocated["itl_ms"]["p99"]
    assert split["requests"]["count"] == colocated["requests"]["count"] == 800


def test_every_request_is_served_within_its_limits() -> None:
    load = seeded(rate=40.0, requests=600)  # overloaded: queues grow
    for name in LAYOUTS:
        layout = Layout(name, max_seqs=8, kv_tokens=4000)
        book = simulate_llm(load, layout, MEASURED)
        first, done = np.asarray(book.first), np.asarray(book.done)
        assert np.all(np.isfinite(done)) and np.all(done >= first)
        assert np.all(first >= load.arrivals)
        assert book.segments()[:, 5].max() <= 8  # each instance
        # tokens/s comes to the tokens made over the span
        r = summarize_llm(book)
        assert r["throughput"]["tokens_per_s"] == pytest.approx(64 * 600 / r["span_s"])


def test_goodput_counts_requests_that_met_every_slo() -> None:
    ttft = np.asarray([10.0, 30.0, 50.0, 20.0])
    tpot = np.asarray([5.0, np.nan, 5.0, 25.0])  # nan: a one-token request
    g = goodput(ttft, tpot, 40.0, 20.0, per_s=0.5)
    assert g is not None and g["count"] == 2 and g["share"] == 0.5 and g["requests_per_s"] == 1.0
    only_ttft = goodput(ttft, tpot, 40.0, None, per_s=1.0)
    assert only_ttft is not None and only_ttft["count"] == 3
    assert goodput(ttft, tpot, None, None, per_s=1.0) is None


def test_lengths_are_seeded_and_checked() -> None:
    schedule = make_schedule(parse_traffic("poisson:50"), 0, 1, requests=2000)
    spec = parse_length("lognormal:256,0.6", "--prompt-len")
    a = make_workload(schedule, spec, parse_length("16-32", "--new-tokens"), seed=1)
    b = make_workload(schedule, spec, parse_length("16-32", "--new-tokens"), seed=1)
    assert np.array_equal(a.prompt, b.prompt) and np.array_equal(a.output, b.output)
    assert a.prompt.max() <= 1024 and 200 < np.median(a.prompt) < 320
    assert a.output.min() >= 16 and a.output.max() <= 32
    for bad in ("0", "9-3", "x", "lognormal:100"):
        with pytest.raises(ConfigError, match="--prompt-len"):
            parse_length(bad, "--prompt-len")


def test_a_long_simulation_says_how_far_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """A million requests take tens of seconds: the loop reports finished requests as it
    goes (here every 64 events), never more than there are, never going back."""
    import engine.serve.llm.sim as llm_sim

    monkeypatch.setattr(llm_sim, "PROGRESS_S", 0.0)
    monkeypatch.setattr(llm_sim, "PROGRESS_EVERY", 64)
    heard: list[tuple[int, int]] = []
    w = work([0.0] * 2000, prompt=20, output=4)
    cost = LLMCost.constant(PREFILL_MS, STEP_MS)
    book = simulate_llm(w, Layout("colocated"), cost, lambda done, n: heard.append((done, n)))
    assert heard and all(n == 2000 for _, n in heard)
    done = [d for d, _ in heard]
    assert done == sorted(done) and 0 < done[-1] <= 2000
    assert book.done == simulate_llm(w, Layout("colocated"), cost).done  # nothing changed
