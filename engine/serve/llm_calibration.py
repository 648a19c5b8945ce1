"""Calibrating the LLM serving simulator on the real engine: prefill passes timed at a few
prompt lengths (fitted as a + b*L + c*L^2), a chunked engine's passes (k tokens after `done`
cached, on the serving loop's slots, in its order) at a few k and done, decode steps timed
at batch 1, 2, 4, 8 and at several contexts (a cost per context token), the first decode
steps and prompt passes after a pause, the serving loop's own work in each iteration (its
engine run for a few steps) and how long its idle engine takes to start a request (the loop
itself serving a few); cached on disk per model, config and machine like the batching
simulator's calibration. Rounds are interleaved across the lengths and sizes so a slow
minute on a shared machine hits them all alike."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from engine.backends.genai.model import OpenedLLM, open_llm, read_config
from engine.backends.genai.slots import SlotCache
from engine.config import RunConfig
from engine.events import Event, Progress
from engine.hostinfo import machine_key
from engine.measure.fits import fit_continuing, fit_prefill, fit_slope
from engine.model.info import files_sha256
from engine.serve.calibration_file import (
    calibration_path,
    drift_notice,
    read_calibration,
    write_calibration,
)
from engine.serve.llm_cost import LLMCost
from engine.serve.llm_instance import Book
from engine.serve.llm_iteration import IterationEngine
from engine.serve.llm_loop import LLMServingLoop
from engine.serve.llm_sim import Layout
from engine.serve.llm_workload import LLMWorkload

VERSION = 7  # 2: prefill passes are per prompt; 3: decode steps after a prefill; 4: after idle
# 5: the serving loop's own work per iteration; 6: passes that continue a prompt; 7: those
# passes timed in the loop's order (after passes of their own size, first chunks too)
PROMPT_LENGTHS = (16, 64, 256, 512, 1024)
CHUNK_TOKENS = (16, 32, 64, 128, 256)  # a continuing pass's new tokens (chunk sizes)
CHUNK_DONE = (0, 64, 256, 512)  # the tokens cached before it (0: a chunked prompt's first)
SETTLE_PASSES = 4  # untimed passes of the smallest chunk before each round
DECODE_BATCHES = (1, 2, 4, 8)
REF_CONTEXT = 64  # each sequence's context while the batch sizes are timed
SLOPE_CONTEXTS = (64, 512, 1024)
ROUNDS = 5  # timed passes of each length (after one discarded)
STEPS = 12  # timed decode steps per (batch, context) and round
AFTER_LENGTHS = (16, 64, 256)  # prefill passes before which decode steps are timed
AFTER_STEPS = 10  # decode steps timed after each such pass
AFTER_BATCH = 2
AFTER_ROUNDS = 9
AFTER_PAUSES_MS = (1.0, 5.0, 20.0, 50.0)  # idle pauses after which decode steps are timed
IDLE_PROMPT_TOKENS = 64  # and prompt passes of this many tokens,
IDLE_PROMPT_PASSES = 4  # this many
OWN_BATCH = 4  # sequences in the iterations whose own work is timed (each round)
IDLE_START_REQUESTS = 16  # short requests the serving loop serves, one at a time,
IDLE_START_GAP_S = 0.03  # this far apart: how long an idle engine takes to start one


def llm_calibration_context(model_path: str, config: RunConfig, provider: str) -> dict[str, Any]:
    """What a calibration depends on (its cache key)."""
    llm = read_config(model_path)
    return {
        "version": VERSION,
        "kind": "llm",
        "model_sha256": files_sha256([llm.model_file, llm.folder / "genai_config.json"]),
        "config": config.to_json(),
        "provider": provider,
        "prompt_lengths": _lengths(llm.context_length),
        "continuing": _continuing_cases(llm.context_length),
        "decode_batches": list(DECODE_BATCHES),
        "slope_contexts": _contexts(llm.context_length),
        "after_prefill": [AFTER_BATCH, AFTER_STEPS, _after_lengths(llm.context_length)],
        "after_idle": [AFTER_BATCH, AFTER_STEPS, list(AFTER_PAUSES_MS)],
        **machine_key(),
    }


def _lengths(context_length: int) -> list[int]:
    return [n for n in PROMPT_LENGTHS if n + 1 < context_length] or [max(1, context_length // 2)]


def _continuing_cases(context_length: int) -> list[list[int]]:
    """[tokens, done] of the continuing passes timed: those that fit the context."""
    return [[k, d] for k in CHUNK_TOKENS for d in CHUNK_DONE if d + k + 1 < context_length]


def _after_lengths(context_length: int) -> list[int]:
    return [n for n in AFTER_LENGTHS if n + 1 < context_length]


def _contexts(context_length: int) -> list[int]:
    fit = [c for c in SLOPE_CONTEXTS if c + STEPS + 2 < context_length]
    return fit or [max(1, context_length // 4)]


def load_or_calibrate_llm(
    model_path: str, config: RunConfig, remeasure: bool = False
) -> Generator[Event, None, LLMCost]:
    """The cached calibration of this model, config and machine, or a new one."""
    llm = open_llm(model_path, config)
    context = llm_calibration_context(model_path, config, llm.provider_used)
    path = calibration_path(context, "llm-")
    if not remeasure:
        cached, notice = read_calibration(path, LLMCost.from_json, "LLM calibration")
        if notice is not None:
            yield notice
        if cached is not None:
            ratio = decode_speed_now(llm, cached)
            drift = drift_notice("decode steps", ratio, path, "tick Recalibrate")
            if drift is not None:
                yield drift
            return cached
    cost = yield from measure(llm, context)
    write_calibration(path, cost.to_json())
    return cost


def decode_speed_now(llm: OpenedLLM, cached: LLMCost) -> float:
    """Decode steps of one sequence now against the cached calibration's (as it timed them:
    3 rounds of STEPS steps from REF_CONTEXT tokens; 1.2: 20% slower now)."""
    rng = np.random.default_rng(0)

    def ids(batch: int, n: int) -> np.ndarray:
        return rng.integers(llm.first_plain_token, llm.vocab_size, (batch, n), dtype=np.int64)

    steps = [ms for _ in range(3) for ms in _steps(llm, 1, REF_CONTEXT, ids)]
    return float(np.median(steps)) / cached.decode_step_ms(1, cached.decode_ref_context)


def measure(llm: OpenedLLM, context: dict[str, Any]) -> Generator[Event, None, LLMCost]:
    lengths, contexts = context["prompt_lengths"], context["slope_contexts"]
    rng = np.random.default_rng(0)
    low = llm.first_plain_token

    def ids(batch: int, n: int) -> np.ndarray:
        return rng.integers(low, llm.vocab_size, size=(batch, n), dtype=np.int64)

    prefill: dict[int, list[float]] = {n: [] for n in lengths}
    decoders = {n: llm.decoder(1, n + 1) for n in lengths}
    for r in range(ROUNDS + 1):
        yield Progress("calibration", r, ROUNDS + 1, f"prefill at {len(lengths)} prompt lengths")
        for n in lengths:
            prompt = ids(1, n)
            t0 = time.perf_counter()
            decoders[n].prefill(prompt).argmax(axis=-1)
            if r:  # the first round warms up
                prefill[n].append((time.perf_counter() - t0) * 1e3)
    del decoders
    pre_ms = {n: float(np.median(v)) for n, v in prefill.items()}
    lens = np.asarray(lengths, np.float64)
    a, b, c = fit_prefill(lens, np.asarray([pre_ms[n] for n in lengths]))
    cases_c = [(int(k), int(d)) for k, d in context.get("continuing", [])]
    cont_ms: dict[tuple[int, int], float] = {}
    continuing = None
    if cases_c:
        times_c = yield from _continuing_passes(llm, cases_c, ids)
        cont_ms = {kd: float(np.median(v)) for kd, v in times_c.items()}
        ks, ds = (np.asarray(x, np.float64) for x in zip(*cases_c, strict=True))
        continuing = fit_continuing(ks, ds, np.asarray([cont_ms[kd] for kd in cases_c]))

    cases = [(bt, REF_CONTEXT) for bt in DECODE_BATCHES] + [(1, cx) for cx in contexts]
    cases = list(dict.fromkeys(cases))
    steps: dict[tuple[int, int], list[float]] = {k: [] for k in cases}
    for r in range(ROUNDS):
        yield Progress("calibration", r, ROUNDS, "decode steps by batch size and context")
        for bt, cx in cases:
            steps[(bt, cx)].extend(_steps(llm, bt, cx, ids))
    step_ms = {k: float(np.median(v)) for k, v in steps.items()}
    own: list[float] = []
    for r in range(ROUNDS):
        yield Progress("calibration", r, ROUNDS, "the serving loop's own work per iteration")
        own.extend(_own_work(llm, ids))
    own_ms = max(0.0, float(np.median(own)))
    yield Progress("calibration", 0, 1, "how long an idle engine takes to start a request")
    idle_start = _idle_start(llm)
    idle_start_ms = max(0.0, float(np.median(idle_start))) if idle_start else 0.0
    after_lengths = list(context.get("after_prefill", [0, 0, []])[2])
    pauses = list(context.get("after_idle", [0, 0, []])[2])
    after: dict[int, list[list[float]]] = {n: [] for n in after_lengths}
    idle: dict[float, list[list[float]]] = {ms: [] for ms in pauses}
    tight: list[float] = []
    prompt_idle: dict[float, list[list[float]]] = {ms: [] for ms in pauses}
    prompt_tight: list[float] = []
    for r in range(AFTER_ROUNDS):
        yield Progress("calibration", r, AFTER_ROUNDS, "passes after a prefill or a pause")
        for n in after_lengths:
            times, base = _after_prefill(llm, n, ids)
            after[n].append(times)
            tight.extend(base)
        for ms in pauses:
            times, base = _after_pause(llm, ms / 1e3, ids)
            idle[ms].append(times)
            tight.extend(base)
            times, base = _prompt_after_pause(llm, ms / 1e3, ids)
            prompt_idle[ms].append(times)
            prompt_tight.extend(base)
    tight_ms = float(np.median(tight)) if tight else 0.0
    prompt_base = float(np.median(prompt_tight)) if prompt_tight else 0.0

    def extras(rows: list[list[float]]) -> tuple[float, ...]:
        return _settling([float(np.median(col)) - tight_ms for col in zip(*rows, strict=True)])

    after_ms = tuple(extras(after[n]) for n in after_lengths)
    idle_ms = tuple(extras(idle[ms]) for ms in pauses)
    prompt_ms = tuple(
        _settling(
            [float(np.median(col)) - prompt_base for col in zip(*prompt_idle[ms], strict=True)]
        )
        for ms in pauses
    )
    slope, _ = fit_slope(
        np.asarray([float(cx) for cx in contexts]),
        np.asarray([step_ms[(1, cx)] for cx in contexts]),
    )
    return LLMCost(
        prefill_a_ms=a,
        prefill_b_ms=b,
        prefill_c_ms=c,
        decode_ms={bt: step_ms[(bt, REF_CONTEXT)] for bt in DECODE_BATCHES},
        decode_ref_context=REF_CONTEXT + 2 + STEPS // 2,  # the mean context of the timed steps
        decode_slope_ms=slope,
        kv_bytes_per_token=llm.kv_bytes_per_token,
        prefill_pass_per_prompt=True,  # the serving loop prefills each prompt on its slot
        iteration_ms=own_ms,
        idle_start_ms=idle_start_ms,
        continuing=continuing,
        after_prefill_lengths=tuple(after_lengths),
        after_prefill_ms=after_ms,
        after_idle_pauses_ms=tuple(pauses),
        after_idle_ms=_growing(idle_ms),
        after_idle_prompt_ms=_growing(prompt_ms),
        context=context,
        points={
            "prefill_ms": {str(n): pre_ms[n] for n in lengths},
            "continuing_ms": {f"{k}@{d}": v for (k, d), v in cont_ms.items()},
            "decode_ms": {f"{bt}x{cx}": v for (bt, cx), v in step_ms.items()},
            "after_prefill_tight_ms": tight_ms,
            "iteration_own_ms": own_ms,
            "idle_start_ms": [round(x, 4) for x in idle_start],
            "rounds": ROUNDS,
            "steps_per_round": STEPS,
        },
    )


def _continuing_passes(
    llm: OpenedLLM, cases: list[tuple[int, int]], ids: Any
) -> Generator[Event, None, dict[tuple[int, int], list[float]]]:
    """Passes of k tokens after `done` cached, on the serving loop's slots (`SlotCache`),
    ms each, in the order a chunked loop runs them: each case's `done` tokens prefilled
    untimed in passes of k (as the loop's chunks build a prompt), a first chunk (done 0)
    after one untimed pass of its size, the cases by k ascending, and SETTLE_PASSES
    passes of the smallest k before each round; ROUNDS rounds after one discarded.
    A pass runs slower for a few passes after a much longer one (on the demo LLM, Intel
    Xeon: 16 tokens took 2.65, 2.13, 1.49 then 1.25 ms after a 768-token pass, and 1.25
    from the first after 64), so timed after the previous case's longest passes, as
    calibration 6 did, a short pass took 1.5-1.7x what it takes in the loop."""
    most = max(k + d for k, d in cases) + 1
    slots = SlotCache(llm.session, llm.shape, 1, most)
    out: dict[tuple[int, int], list[float]] = {kd: [] for kd in cases}
    order = sorted(cases)
    smallest = order[0][0]
    for r in range(ROUNDS + 1):
        yield Progress("calibration", r, ROUNDS + 1, f"{len(cases)} passes that continue a prompt")
        for _ in range(SETTLE_PASSES):
            slots.prefill(0, ids(1, smallest)[0], 0)
        for k, d in order:
            prompt = ids(1, d + k)[0]
            for s in range(0, d, k) if d else (0,):
                slots.prefill(0, prompt[s : min(s + k, d)] if d else prompt, s)
            t0 = time.perf_counter()
            slots.prefill(0, prompt[d:], d)
            if r:
                out[(k, d)].append((time.perf_counter() - t0) * 1e3)
    return out


def _steps(llm: OpenedLLM, batch: int, context: int, ids: Any) -> list[float]:
    """STEPS decode steps of `batch` sequences from a context of `context` tokens, ms each
    (a step: the forward pass and the next token's choice, as generate times it)."""
    decoder = llm.decoder(batch, context + STEPS + 2)
    token = decoder.prefill(ids(batch, context)).argmax(axis=-1)
    token = decoder.step(token).argmax(axis=-1)  # one untimed step: the first after prefill
    return _timed_steps(decoder, token, STEPS)[0]


def _own_work(llm: OpenedLLM, ids: Any) -> list[float]:
    """The serving loop's own work in each decode iteration, ms: OWN_BATCH sequences
    prefilled, then STEPS iterations planned and run by the loop's engine
    (llm_iteration.IterationEngine), each one's time less its decode pass's. On the demo
    LLM in the real loop: 41 us a decode-only iteration (3.5% of one); the simulator had
    charged none of it."""
    length = REF_CONTEXT + STEPS + 4
    slots = SlotCache(llm.session, llm.shape, OWN_BATCH, length)
    n = OWN_BATCH
    book = Book([0.0] * n, [REF_CONTEXT] * n, [STEPS + 4] * n)
    prompts = {rid: ids(1, REF_CONTEXT)[0] for rid in range(n)}
    engine = IterationEngine(
        slots, book, prompts.__getitem__, time.perf_counter, budget=n * REF_CONTEXT,
        split=False, max_seqs=n, kv_tokens=n * length,
    )  # fmt: skip
    passes: list[float] = []
    decode = slots.decode

    def timed(tokens: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        t0 = time.perf_counter()
        out = decode(tokens, lengths)
        passes.append(time.perf_counter() - t0)
        return out

    slots.decode = timed  # type: ignore[method-assign]
    engine.plan(deque(range(n)))
    engine.iterate()  # the prompts' passes
    out = []
    for k in range(STEPS + 1):
        t0 = time.perf_counter()
        engine.plan(deque())
        engine.iterate()
        if k:  # the first decode step after the prefills is not a plain one
            out.append((time.perf_counter() - t0 - passes[-1]) * 1e3)
    return out


def _idle_start(llm: OpenedLLM) -> list[float]:
    """How long the serving loop's idle engine takes to start a request, ms from its
    scheduled time to the start of the iteration that prefills it: the loop itself (its
    sender and engine threads, as `load --llm` runs them) serving IDLE_START_REQUESTS
    requests of 16 prompt tokens and 1 new one, IDLE_START_GAP_S apart, each on an idle
    engine. On the demo LLM (Intel Xeon) in the real loop: 0.29-0.33 ms (the sender's
    lateness 0.10, the engine thread's wake-up and plan 0.18), which the simulator had
    not charged."""
    n = IDLE_START_REQUESTS
    arrivals = np.arange(n) * IDLE_START_GAP_S
    work = LLMWorkload(arrivals, np.full(n, 16, np.int64), np.ones(n, np.int64))
    loop = LLMServingLoop(llm, work, Layout("colocated", max_seqs=1), seed=0)
    for _ in loop.run():
        pass  # its progress is the calibration's
    if loop.unfinished():
        return []
    it = np.asarray([row[:2] for row in loop.engine.iterations], np.float64)
    out = []
    for a in arrivals:
        j = int(np.searchsorted(it[:, 0], a))
        if j < len(it) and (j == 0 or it[j - 1, 1] < a):  # the engine sat idle at `a`
            out.append(float(it[j, 0] - a) * 1e3)
    return out


def _after_prefill(llm: OpenedLLM, length: int, ids: Any) -> tuple[list[float], list[float]]:
    """AFTER_STEPS decode steps of AFTER_BATCH sequences, each ms, timed right after a
    prefill pass of `length` tokens on another sequence (as the serving loop runs a new
    prompt between decode steps); then as many steps back to back, the baseline."""
    other = llm.decoder(1, length + 1)
    return _steps_after(llm, ids, lambda: other.prefill(ids(1, length)).argmax(axis=-1))


def _after_pause(llm: OpenedLLM, pause_s: float, ids: Any) -> tuple[list[float], list[float]]:
    """AFTER_STEPS decode steps of AFTER_BATCH sequences, each ms, timed right after the
    engine sat idle for `pause_s` (a serving engine's thread waiting for work); then as
    many steps back to back, the baseline."""
    return _steps_after(llm, ids, lambda: time.sleep(pause_s))


def _prompt_after_pause(
    llm: OpenedLLM, pause_s: float, ids: Any
) -> tuple[list[float], list[float]]:
    """IDLE_PROMPT_PASSES prompt passes of IDLE_PROMPT_TOKENS on the serving loop's slots
    timed right after the engine sat idle for `pause_s`, and as many right after passes of
    their size (the baseline), ms each. On the demo LLM (Intel Xeon) in the real loop, the
    passes (4-4.8 ms) after 50-100 ms idle took 1.35, 0.73, 0.41 ms more, after 20-50 ms
    0.97, 0.53, 0.30; a decode step 0.6 after 50."""
    n = IDLE_PROMPT_TOKENS
    slots = SlotCache(llm.session, llm.shape, 1, n + 1)

    def passes() -> list[float]:
        out = []
        for _ in range(IDLE_PROMPT_PASSES):
            prompt = ids(1, n)[0]
            t0 = time.perf_counter()
            slots.prefill(0, prompt, 0)
            out.append((time.perf_counter() - t0) * 1e3)
        return out

    passes()  # warm: the passes before the baseline are of its size
    base = passes()
    time.sleep(pause_s)
    return passes(), base


def _steps_after(
    llm: OpenedLLM, ids: Any, between: Callable[[], object]
) -> tuple[list[float], list[float]]:
    """Warm decode steps, then `between`, then AFTER_STEPS timed steps and as many more
    back to back (the baseline)."""
    decoder = llm.decoder(AFTER_BATCH, REF_CONTEXT + 3 * AFTER_STEPS + 2)
    token = decoder.prefill(ids(AFTER_BATCH, REF_CONTEXT)).argmax(axis=-1)
    for _ in range(AFTER_STEPS):  # warm: the weights back in the caches
        token = decoder.step(token).argmax(axis=-1)
    between()
    after, token = _timed_steps(decoder, token, AFTER_STEPS)
    return after, _timed_steps(decoder, token, AFTER_STEPS)[0]


def _timed_steps(decoder: Any, token: np.ndarray, n: int) -> tuple[list[float], np.ndarray]:
    """`n` decode steps from `token`: each one's ms, and the last token chosen."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        token = decoder.step(token).argmax(axis=-1)
        out.append((time.perf_counter() - t0) * 1e3)
    return out, token


def _growing(rows: tuple[tuple[float, ...], ...]) -> tuple[tuple[float, ...], ...]:
    """Extras after pauses made what they physically are: never smaller after a longer
    pause (each row at least the one before it, step by step)."""
    out: list[tuple[float, ...]] = []
    for row in rows:
        out.append(tuple(max(x, y) for x, y in zip(row, out[-1], strict=True)) if out else row)
    return tuple(out)


def _settling(extra: list[float]) -> tuple[float, ...]:
    """Extra ms per step after a prefill, made what it physically is: never negative and
    never growing with the steps since (the caches only refill), so that one slow step in
    a noisy minute does not read as a later penalty."""
    out, cap = [], float("inf")
    for x in extra:
        cap = min(cap, max(0.0, x))
        out.append(cap)
    return tuple(out)
