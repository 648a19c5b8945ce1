"""One round of a calibration point timed on the real engine (calibrate.py measures the
points a study needs, in rounds; this times each): prefill passes, decode steps, a chunked
engine's passes, the extras after a prefill and a pause, the serving loop's own work and an
idle engine's start. What a point needs prefilled first is kept across rounds, untimed."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from engine.backends.genai.model import OpenedLLM
from engine.backends.genai.slots import SlotCache
from engine.serve.llm.cal_plan import (
    REF_CONTEXT,
    SMALL_CHUNK,
    STEPS,
    Point,
)
from engine.serve.llm.instance import Book
from engine.serve.llm.iteration import IterationEngine
from engine.serve.llm.real_loop import LLMServingLoop
from engine.serve.llm.requests import LLMWorkload
from engine.serve.llm.sim import Layout

SETTLE_PASSES = 3  # untimed passes of the smallest chunk before the timed ones
AFTER_BATCH = 2
WARM_STEPS = 4  # untimed decode steps before a prefill or a pause (the weights cached)
AFTER_STEPS = 8  # decode steps timed after it, and as many back to back (the baseline)
IDLE_PROMPT_TOKENS = 64  # prompt passes of this many tokens timed after a pause,
IDLE_PROMPT_PASSES = 4  # this many
OWN_BATCH = 4  # sequences in the iterations whose own work is timed (each round),
OWN_PROMPT = 16  # of this many prompt tokens (prefilled each round: short)
IDLE_START_REQUESTS = 12  # short requests the serving loop serves, one at a time,
IDLE_START_GAP_S = 0.03  # this far apart: how long an idle engine takes to start one


class _Running:
    """A decoder kept across rounds: its context grows by the steps taken."""

    def __init__(self, decoder: Any, token: np.ndarray, position: int) -> None:
        self.decoder, self.token, self.position = decoder, token, position

    def steps(self, n: int, timed: bool = True) -> list[float]:
        out, self.token = timed_steps(self.decoder, self.token, n)
        self.position += n
        return out if timed else []


class Meter:
    """Times one round of a point (`round`); decoders and slots that need their context
    prefilled are kept across rounds, and that setup is not counted in a round's time."""

    def __init__(self, llm: OpenedLLM) -> None:
        self.llm = llm
        self.rng = np.random.default_rng(0)
        self.kept: dict[str, Any] = {}
        self.setup_s = 0.0

    def ids(self, batch: int, n: int) -> np.ndarray:
        low, high = self.llm.first_plain_token, self.llm.vocab_size
        return self.rng.integers(low, high, size=(batch, n), dtype=np.int64)

    def round(self, p: Point) -> tuple[dict[str, Any], float]:
        """One round of `p`: its record and the seconds it took (less any setup)."""
        self.setup_s = 0.0
        t0 = time.perf_counter()
        rnd = getattr(self, f"_{p.kind}")(p)
        return rnd, max(0.0, time.perf_counter() - t0 - self.setup_s)

    def _keep(self, key: str, make: Callable[[], Any]) -> Any:
        """What point `key` keeps across rounds, made (untimed) the first time."""
        if key not in self.kept:
            t0 = time.perf_counter()
            self.kept[key] = make()
            self.setup_s += time.perf_counter() - t0
        return self.kept[key]

    def _running(self, p: Point, batch: int, context: int, steps: int) -> _Running:
        def make() -> _Running:
            decoder = self.llm.decoder(batch, context + p.max_rounds * steps + 4)
            return _Running(decoder, decoder.prefill(self.ids(batch, context)).argmax(axis=-1),
                            context)  # fmt: skip

        return self._keep(p.key, make)  # type: ignore[no-any-return]

    def _prefill(self, p: Point) -> dict[str, Any]:
        """One pass over a prompt of `n` tokens (a first, untimed, warms it up)."""
        (n,) = p.args

        def make() -> Any:
            decoder = self.llm.decoder(1, n + 1)
            decoder.prefill(self.ids(1, n)).argmax(axis=-1)
            return decoder

        decoder = self._keep(p.key, make)
        prompt = self.ids(1, n)
        t0 = time.perf_counter()
        decoder.prefill(prompt).argmax(axis=-1)
        return {"ms": [(time.perf_counter() - t0) * 1e3]}

    def _decode(self, p: Point) -> dict[str, Any]:
        """STEPS decode steps of `batch` sequences (a step: the forward pass and the next
        token's choice, as generate times it), after one untimed; `ctx`: the context
        before the first timed one."""
        batch, context, _ = p.args
        run = self._running(p, batch, context, STEPS + 1)
        run.steps(1, timed=False)
        ctx = run.position
        return {"ms": run.steps(STEPS), "ctx": ctx}

    def _chunks(self, p: Point) -> dict[str, Any]:
        """A prompt of `span` tokens built in passes of `chunk` on the serving loop's slots
        (each pass timed: k tokens after `done`), then small passes (SMALL_CHUNK and a
        quarter chunk) at the start, the middle and the end, each after SETTLE_PASSES of
        the smallest: a pass runs slower for a few passes after a much longer one (on the
        demo LLM, Intel Xeon: 16 tokens took 2.65, 2.13, 1.49 then 1.25 ms after a
        768-token pass), so small passes are timed after passes of their size, as the
        loop's chunked engine runs them."""
        chunk, span = p.args
        slots = self._keep(p.key, lambda: SlotCache(self.llm.session, self.llm.shape, 1, span + 1))
        prompt = self.ids(1, span)[0]
        ks, ds, ms = [], [], []

        def timed(k: int, d: int) -> None:
            t0 = time.perf_counter()
            slots.prefill(0, prompt[d : d + k], d)
            ks.append(k)
            ds.append(d)
            ms.append((time.perf_counter() - t0) * 1e3)

        for _ in range(SETTLE_PASSES):
            slots.prefill(0, prompt[:SMALL_CHUNK], 0)
        for d in range(0, span - chunk + 1, chunk):
            timed(chunk, d)
        last = span - chunk
        for k in sorted({SMALL_CHUNK, max(SMALL_CHUNK, chunk // 4)}):
            for _ in range(SETTLE_PASSES):
                slots.prefill(0, prompt[:k], 0)
            for d in sorted({0, (last // 2) // SMALL_CHUNK * SMALL_CHUNK, last}):
                timed(k, d)
        return {"k": ks, "d": ds, "ms": ms}

    def _after(self, p: Point) -> dict[str, Any]:
        """Decode steps of AFTER_BATCH sequences, AFTER_STEPS timed right after a prefill
        pass of each length on another sequence (as the serving loop runs a new prompt
        between decode steps), then as many back to back: the baseline; ms each, by
        length. The steps after one prefill settle the engine before the next."""

        def decoder(n: int) -> Callable[[], Any]:
            return lambda: self.llm.decoder(1, n + 1)

        other = {n: self._keep(f"{p.key} other {n}", decoder(n)) for n in p.args}

        def prefill(n: int) -> Callable[[], object]:
            return lambda: other[n].prefill(self.ids(1, n)).argmax(axis=-1)

        return self._steps_after(p, {str(n): prefill(n) for n in p.args})

    def _pause(self, p: Point) -> dict[str, Any]:
        """The same steps right after the engine sat idle for each pause, ms (a serving
        engine's thread waiting for work)."""

        def pause(ms: int) -> Callable[[], object]:
            return lambda: time.sleep(ms / 1e3)

        return self._steps_after(p, {str(ms): pause(ms) for ms in p.args})

    def _steps_after(self, p: Point, between: dict[str, Callable[[], object]]) -> dict[str, Any]:
        per_round = WARM_STEPS + AFTER_STEPS * (len(between) + 1)
        run = self._running(p, AFTER_BATCH, REF_CONTEXT, per_round)
        run.steps(WARM_STEPS, timed=False)  # warm: the weights back in the caches
        after = {}
        for key, action in between.items():
            action()
            after[key] = run.steps(AFTER_STEPS)
        return {"ms": after, "base": run.steps(AFTER_STEPS)}

    def _prompt_pause(self, p: Point) -> dict[str, Any]:
        """IDLE_PROMPT_PASSES prompt passes of IDLE_PROMPT_TOKENS on the serving loop's
        slots timed right after passes of their size (the baseline), then as many right
        after the engine sat idle for each pause, ms each, by pause. On the demo LLM (Intel
        Xeon) in the real loop, the passes (4-4.8 ms) after 50-100 ms idle took 1.35, 0.73,
        0.41 ms more, after 20-50 ms 0.97, 0.53, 0.30; a decode step 0.6 after 50."""
        n = IDLE_PROMPT_TOKENS
        slots = self._keep(p.key, lambda: SlotCache(self.llm.session, self.llm.shape, 1, n + 1))

        def passes(count: int) -> list[float]:
            out = []
            for _ in range(count):
                prompt = self.ids(1, n)[0]
                t0 = time.perf_counter()
                slots.prefill(0, prompt, 0)
                out.append((time.perf_counter() - t0) * 1e3)
            return out

        passes(2)  # warm: the passes before the baseline are of its size
        base = passes(IDLE_PROMPT_PASSES)
        after = {}
        for ms in p.args:
            time.sleep(ms / 1e3)
            after[str(ms)] = passes(IDLE_PROMPT_PASSES)
        return {"ms": after, "base": base}

    def _own(self, p: Point) -> dict[str, Any]:
        """The serving loop's own work in each decode iteration, ms: OWN_BATCH sequences
        of OWN_PROMPT tokens prefilled, then STEPS iterations planned and run by the loop's engine
        (iteration.IterationEngine), each one's time less its decode pass's. On the
        demo LLM in the real loop: 41 us a decode-only iteration (3.5% of one); the
        simulator had charged none of it."""
        llm = self.llm
        prompt = OWN_PROMPT
        length = prompt + STEPS + 4
        slots = SlotCache(llm.session, llm.shape, OWN_BATCH, length)
        n = OWN_BATCH
        book = Book([0.0] * n, [prompt] * n, [STEPS + 4] * n)
        prompts = {rid: self.ids(1, prompt)[0] for rid in range(n)}
        engine = IterationEngine(
            slots, book, prompts.__getitem__, time.perf_counter, budget=n * prompt,
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
        return {"ms": out}

    def _idle(self, p: Point) -> dict[str, Any]:
        """How long the serving loop's idle engine takes to start a request, ms from its
        scheduled time to the start of the iteration that prefills it: the loop itself
        (its sender and engine threads, as `load --llm` runs them) serving
        IDLE_START_REQUESTS requests of 16 prompt tokens and 1 new one, IDLE_START_GAP_S
        apart, each on an idle engine. On the demo LLM (Intel Xeon) in the real loop:
        0.29-0.33 ms (the sender's lateness 0.10, the engine thread's wake-up and plan
        0.18), which the simulator had not charged."""
        n = IDLE_START_REQUESTS
        arrivals = np.arange(n) * IDLE_START_GAP_S
        work = LLMWorkload(arrivals, np.full(n, 16, np.int64), np.ones(n, np.int64))
        loop = LLMServingLoop(self.llm, work, Layout("colocated", max_seqs=1), seed=0)
        for _ in loop.run():
            pass  # its progress is the calibration's
        if loop.unfinished():
            return {"ms": []}
        it = np.asarray([row[:2] for row in loop.engine.iterations], np.float64)
        out = []
        for a in arrivals:
            j = int(np.searchsorted(it[:, 0], a))
            if j < len(it) and (j == 0 or it[j - 1, 1] < a):  # the engine sat idle at `a`
                out.append(float(it[j, 0] - a) * 1e3)
        return {"ms": out}


def timed_steps(decoder: Any, token: np.ndarray, n: int) -> tuple[list[float], np.ndarray]:
    """`n` decode steps from `token`: each one's ms, and the last token chosen."""
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        token = decoder.step(token).argmax(axis=-1)
        out.append((time.perf_counter() - t0) * 1e3)
    return out, token
