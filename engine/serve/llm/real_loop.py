"""The real LLM serving loop: open-loop requests sent at their scheduled times by a sender
thread (as the single-forward serving loop sends them), one engine thread running
continuous-batching iterations (IterationEngine: the simulator's colocated or chunked
rules) on one KV buffer of `max_seqs` slots. Times run from the schedule's start, so a
request's TTFT counts from its scheduled arrival: one that arrives while the engine is
busy waits for the iteration boundary, as in the simulator. What each request saw lands
in the simulator's Book, summarized by the same code (metrics)."""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Generator

import numpy as np

from engine import interrupt
from engine.backends.genai.model import OpenedLLM
from engine.backends.genai.slots import SlotCache
from engine.errors import ConfigError
from engine.events import Event, Notice, Progress
from engine.serve.llm.disagg import DecodeEngine, Links, prefill_handoff
from engine.serve.llm.instance import Book
from engine.serve.llm.iteration import IterationEngine, prompt_ids
from engine.serve.llm.prefix_kv import PrefixKV, shared_prompt
from engine.serve.llm.requests import LLMWorkload
from engine.serve.llm.sim import Layout
from engine.serve.loop import (
    LATE_WARN_MS,
    LEAD_S,
    LONG_WAIT_S,
    PARK_S,
    PROGRESS_S,
    SWITCH_S,
    precise_timers,
)
from engine.serve.sched_slice import short_slice

REAL_LAYOUTS = ("colocated", "chunked", "disaggregated")
WARMUP_TOKENS = 32


def check_real_layout(layout: Layout) -> None:
    layout.check()
    if layout.name not in REAL_LAYOUTS:
        raise ConfigError(f"--layout {layout.name}: the real loop serves "
                          f"{' or '.join(REAL_LAYOUTS)} (simulate the others)")  # fmt: skip
    if layout.name != "disaggregated" and layout.instances != 1:
        raise ConfigError(f"--instances {layout.instances}: the real loop runs one engine "
                          "(several: --layout disaggregated, one thread per engine)")  # fmt: skip


class LLMServingLoop:
    """One serving run of `work` on `llm`; `run()` yields progress until every request
    sent has its last token. Afterwards: `book`, `tokens(rid)`, `engines` (colocated and
    chunked: one, also `engine`), `sent`."""

    def __init__(
        self,
        llm: OpenedLLM,
        work: LLMWorkload,
        layout: Layout,
        seed: int = 0,
        report_s: float = PROGRESS_S,
        deadline_s: float | None = None,
        prefix_blocks: int = 0,
    ) -> None:
        check_real_layout(layout)
        self.work, self.layout, self.report_s = work, layout, report_s
        self.deadline_s = deadline_s  # seconds from the start: the run stops then, said so
        self.timed_out = False
        self.book = Book(work.arrivals.tolist(), work.prompt.tolist(), work.output.tolist())
        longest = int((work.prompt + work.output).max()) if len(work) else 1
        kv_tokens = layout.kv_tokens or layout.max_seqs * longest
        if longest > kv_tokens:
            raise ConfigError(f"a request of {longest} tokens does not fit the KV budget of "
                              f"{kv_tokens} tokens (--kv-tokens)")  # fmt: skip
        if longest > llm.context_length:
            raise ConfigError(f"a request of {longest} tokens exceeds the model's context of "
                              f"{llm.context_length}")  # fmt: skip
        length = max(longest, WARMUP_TOKENS + 2)
        low, vocab = llm.first_plain_token, llm.vocab_size
        prompt = self.book.prompt
        self.cond = threading.Condition()

        if prefix_blocks and work.blocks is None:
            raise ConfigError(
                "a prefix cache needs prompts that share prefixes: --shared-prefix "
                "GROUPS,TOKENS, or a Mooncake trace (hash_ids)"
            )
        self.book.prefix_blocks = prefix_blocks
        blocks, block = work.blocks, work.block_tokens

        def prompt_of(rid: int) -> np.ndarray:
            ids = prompt_ids(seed, rid, prompt[rid], low, vocab)
            if blocks is None:
                return ids
            return shared_prompt(ids, blocks[rid], block, seed, low, vocab)

        def prefix() -> PrefixKV | None:
            return PrefixKV(prefix_blocks, block) if prefix_blocks else None

        def cache(tokens: int) -> SlotCache:
            return SlotCache(llm.session, llm.shape, layout.max_seqs, tokens)

        self.prefillers: list[IterationEngine] = []
        self.decoders: list[DecodeEngine] = []
        if layout.name == "disaggregated":
            lock = threading.Lock()
            per_token_s = layout.kv_ms_per_mb / 1e3 * llm.kv_bytes_per_token / 1e6
            self.links = Links(layout.prefill_instances, per_token_s)
            longest_prompt = int(work.prompt.max()) if len(work) else 1
            for k in range(layout.prefill_instances):
                engine = IterationEngine(
                    cache(max(longest_prompt, WARMUP_TOKENS + 2)), self.book, prompt_of,
                    self._now, budget=layout.prefill_tokens, split=False,
                    max_seqs=layout.max_seqs, kv_tokens=kv_tokens, book_lock=lock,
                    prefix=prefix(),
                )  # fmt: skip
                engine.handoff = prefill_handoff(engine, k, self.links, self.cond)
                self.prefillers.append(engine)
            self.decoders = [
                DecodeEngine(
                    cache(length),
                    self.book,
                    self._now,
                    max_seqs=layout.max_seqs,
                    kv_tokens=kv_tokens,
                    book_lock=lock,
                )
                for _ in range(layout.decode_instances)
            ]
            self.engines: list[IterationEngine] = [*self.prefillers, *self.decoders]
        else:
            split = layout.name == "chunked"
            self.engines = [IterationEngine(
                cache(length), self.book, prompt_of, self._now,
                budget=layout.chunk_tokens if split else layout.prefill_tokens, split=split,
                max_seqs=layout.max_seqs, kv_tokens=kv_tokens, prefix=prefix(),
            )]  # fmt: skip
        self.engine = self.engines[0]
        self.slots = self.engine.slots
        self.sent = np.full(len(work), np.nan)
        self.queue: deque[int] = deque()
        self.stop = threading.Event()
        self.interrupted = False  # a signal stopped the run (engine.interrupt)
        self.generator_done = False
        self.prefills_left = len(self.prefillers)
        self.error: BaseException | None = None
        self.t0 = 0.0

    def _now(self) -> float:
        return time.perf_counter() - self.t0

    def tokens(self, rid: int) -> list[int]:
        """The tokens request `rid` got (the prefill's first, then the decode steps')."""
        for engine in reversed(self.engines):  # a decode engine's list holds the first too
            if engine.tokens[rid]:
                return engine.tokens[rid]
        return []

    def warm_up(self) -> None:
        """One prefill and two decode steps on each engine's buffer, untimed: first-run
        costs stay out of the run."""
        ids = np.arange(WARMUP_TOKENS, dtype=np.int64) + 3
        for engine in self.engines:
            token = engine.slots.prefill(0, ids).argmax()
            lengths = np.asarray([WARMUP_TOKENS])
            for _ in range(2):
                token = engine.slots.decode(np.asarray([token]), lengths).argmax(axis=-1)[0]
                lengths += 1

    def run(self) -> Generator[Event, None, None]:
        self.warm_up()
        n = len(self.work)
        if self.decoders:
            threads = [
                threading.Thread(target=self._prefiller, args=(e,), name=f"opscope-llm-prefill{k}")
                for k, e in enumerate(self.prefillers)
            ] + [
                threading.Thread(target=self._decoder, args=(e,), name=f"opscope-llm-decode{k}")
                for k, e in enumerate(self.decoders)
            ]  # fmt: skip
        else:
            threads = [threading.Thread(target=self._engine, name="opscope-llm-engine")]
        sender = threading.Thread(target=self._sender, name="opscope-traffic")
        switch = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_S)
        self.t0 = time.perf_counter() + LEAD_S
        for th in (*threads, sender):
            th.daemon = True
            th.start()
        with interrupt.deferred():  # a signal is polled (engine.interrupt), never raised
            try:  # into the joins: the engines' threads must not be left inside the model
                while any(th.is_alive() for th in threads):
                    next(th for th in threads if th.is_alive()).join(self.report_s)
                    if interrupt.received.is_set():
                        self.interrupted = True
                        break
                    if self.deadline_s is not None and self._now() > self.deadline_s:
                        self.timed_out = True
                        break
                    done = int(np.isfinite(self.book.done).sum())
                    yield Progress("serving", done, n, f"{int(np.isfinite(self.sent).sum()):,} "
                                   f"sent, {done:,} done, {len(self.queue)} queued")  # fmt: skip
                if self.error is not None:
                    raise self.error
            finally:
                self.stop.set()
                with self.cond:
                    self.cond.notify_all()
                for th in threads:  # each ends at its next iteration boundary
                    th.join()
                sender.join()
                sys.setswitchinterval(switch)
        if self.interrupted:
            yield Notice("warning", f"{interrupt.reason()}: sending stopped; "
                         f"{self.unfinished():,} request(s) unfinished")  # fmt: skip
        elif self.timed_out:
            unsent = int((~np.isfinite(self.sent)).sum())
            yield Notice("warning", f"stopped {self.deadline_s:.3g} s in, at the drain deadline "
                         "(the last arrival, then as long again, 10 s at least): "
                         f"{self.unfinished():,} request(s) unfinished, {unsent:,} not yet "
                         "sent")  # fmt: skip
        late = (self.sent - self.work.arrivals) * 1e3
        late = late[np.isfinite(late)]
        if late.size and float(np.percentile(late, 99)) > LATE_WARN_MS:
            yield Notice("warning", f"the traffic sender ran late (p99 "
                         f"{np.percentile(late, 99):.1f} ms behind schedule); latencies still "
                         "run from the scheduled times")  # fmt: skip

    def _sender(self) -> None:
        precise_timers()
        short_slice()
        arrivals = self.work.arrivals
        for j in range(len(arrivals)):
            if self.stop.is_set():
                break
            wait = self.t0 + float(arrivals[j]) - time.perf_counter()
            while wait > PARK_S:  # a long gap: stoppable, in steps a timed wait takes
                if self.stop.wait(min(wait - PARK_S, LONG_WAIT_S)):
                    break
                wait = self.t0 + float(arrivals[j]) - time.perf_counter()
            if self.stop.is_set():
                break
            if wait > 0:
                time.sleep(wait)
            with self.cond:
                self.sent[j] = self._now()
                self.queue.append(j)
                self.cond.notify_all()  # the prefilling engines (one of them takes it)
        with self.cond:
            self.generator_done = True
            self.cond.notify_all()

    def _engine(self) -> None:
        """The colocated or chunked engine."""
        engine = self.engine
        self._serve(engine, lambda: engine.plan(self.queue), self._no_more_prompts)

    def _prefiller(self, engine: IterationEngine) -> None:
        """A disaggregated prefill engine: whole prompts, each handed off when done."""

        def ended() -> None:
            self.prefills_left -= 1
            self.cond.notify_all()  # the decode engines may end too

        self._serve(engine, lambda: engine.plan(self.queue), self._no_more_prompts, ended)

    def _decoder(self, engine: DecodeEngine) -> None:
        """A decode engine: what has landed joins at each boundary; it waits for the next
        landing when idle, and ends when the prefill engines have and nothing is left."""
        links = self.links

        def wait_s() -> float | None:
            nxt = links.next_land()
            return None if nxt is None else max(0.0, nxt - self._now())

        self._serve(
            engine, lambda: engine.plan_landed(links, self._now()),
            lambda: self.prefills_left == 0 and links.next_land() is None, wait_s=wait_s,
        )  # fmt: skip

    def _no_more_prompts(self) -> bool:
        return self.generator_done and not self.queue

    def _serve(
        self,
        engine: IterationEngine,
        plan: Callable[[], bool],
        done: Callable[[], bool],
        ended: Callable[[], None] | None = None,
        wait_s: Callable[[], float | None] = lambda: None,
    ) -> None:
        """An engine thread: under the lock, `plan` the next iteration or wait (`wait_s`,
        None: until notified) until `done` (then `ended`, still under the lock); the
        iteration itself runs outside the lock. An error stops the run; the main thread
        raises it."""
        precise_timers()
        try:
            while True:
                with self.cond:
                    while not plan():
                        if self.stop.is_set() or done():
                            if ended is not None:
                                ended()
                            return
                        self.cond.wait(wait_s())
                if self.stop.is_set():
                    return
                engine.iterate()
        except BaseException as exc:
            self.error = exc
            self.stop.set()
            with self.cond:
                self.cond.notify_all()

    def unfinished(self) -> int:
        """Requests sent but without their last token (0 after a complete run)."""
        return int((np.isfinite(self.sent) & ~np.isfinite(self.book.done)).sum())
