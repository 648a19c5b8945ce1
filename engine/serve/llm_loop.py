"""The real LLM serving loop: open-loop requests sent at their scheduled times by a sender
thread (as the single-forward serving loop sends them), one engine thread running
continuous-batching iterations (IterationEngine: the simulator's colocated or chunked
rules) on one KV buffer of `max_seqs` slots. Times run from the schedule's start, so a
request's TTFT counts from its scheduled arrival: one that arrives while the engine is
busy waits for the iteration boundary, as in the simulator. What each request saw lands
in the simulator's Book, summarized by the same code (llm_summary)."""

from __future__ import annotations

import sys
import threading
import time
from collections import deque
from collections.abc import Generator

import numpy as np

from engine.backends.genai.model import OpenedLLM
from engine.backends.genai.slots import SlotCache
from engine.errors import ConfigError
from engine.events import Event, Notice, Progress
from engine.serve.llm_instance import Book
from engine.serve.llm_iteration import IterationEngine, prompt_ids
from engine.serve.llm_sim import Layout
from engine.serve.llm_workload import LLMWorkload
from engine.serve.loop import LATE_WARN_MS, LEAD_S, PROGRESS_S, SWITCH_S, precise_timers

REAL_LAYOUTS = ("colocated", "chunked")
WARMUP_TOKENS = 32


def check_real_layout(layout: Layout) -> None:
    layout.check()
    if layout.name not in REAL_LAYOUTS:
        raise ConfigError(f"--layout {layout.name}: the real loop serves "
                          f"{' or '.join(REAL_LAYOUTS)} (simulate the others)")  # fmt: skip
    if layout.instances != 1:
        raise ConfigError(f"--instances {layout.instances}: the real loop runs one engine")


class LLMServingLoop:
    """One serving run of `work` on `llm`; `run()` yields progress until every request
    sent has its last token. Afterwards: `book`, `engine.tokens`, `sent`."""

    def __init__(
        self,
        llm: OpenedLLM,
        work: LLMWorkload,
        layout: Layout,
        seed: int = 0,
        report_s: float = PROGRESS_S,
    ) -> None:
        check_real_layout(layout)
        self.work, self.layout, self.report_s = work, layout, report_s
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
        self.slots = SlotCache(llm.session, llm.shape, layout.max_seqs, length)
        low, vocab = llm.first_plain_token, llm.vocab_size
        prompt = self.book.prompt

        def prompt_of(rid: int) -> np.ndarray:
            return prompt_ids(seed, rid, prompt[rid], low, vocab)

        split = layout.name == "chunked"
        self.engine = IterationEngine(
            self.slots, self.book, prompt_of, self._now,
            budget=layout.chunk_tokens if split else layout.prefill_tokens, split=split,
            max_seqs=layout.max_seqs, kv_tokens=kv_tokens,
        )  # fmt: skip
        self.sent = np.full(len(work), np.nan)
        self.queue: deque[int] = deque()
        self.cond = threading.Condition()
        self.stop = threading.Event()
        self.generator_done = False
        self.error: BaseException | None = None
        self.t0 = 0.0

    def _now(self) -> float:
        return time.perf_counter() - self.t0

    def warm_up(self) -> None:
        """One prefill and two decode steps, untimed: first-run costs stay out of the run."""
        ids = np.arange(WARMUP_TOKENS, dtype=np.int64) + 3
        token = self.slots.prefill(0, ids).argmax()
        lengths = np.asarray([WARMUP_TOKENS])
        for _ in range(2):
            token = self.slots.decode(np.asarray([token]), lengths).argmax(axis=-1)[0]
            lengths += 1

    def run(self) -> Generator[Event, None, None]:
        self.warm_up()
        n = len(self.work)
        engine_thread = threading.Thread(target=self._engine, name="opscope-llm-engine")
        sender = threading.Thread(target=self._sender, name="opscope-traffic")
        switch = sys.getswitchinterval()
        sys.setswitchinterval(SWITCH_S)
        self.t0 = time.perf_counter() + LEAD_S
        for th in (engine_thread, sender):
            th.daemon = True
            th.start()
        try:
            while engine_thread.is_alive():
                engine_thread.join(self.report_s)
                done = int(np.isfinite(self.book.done).sum())
                yield Progress("serving", done, n, f"{int(np.isfinite(self.sent).sum()):,} sent, "
                               f"{done:,} done, {len(self.queue)} queued")  # fmt: skip
            if self.error is not None:
                raise self.error
        finally:
            self.stop.set()
            with self.cond:
                self.cond.notify_all()
            engine_thread.join(10)
            sender.join(10)
            sys.setswitchinterval(switch)
        late = (self.sent - self.work.arrivals) * 1e3
        late = late[np.isfinite(late)]
        if late.size and float(np.percentile(late, 99)) > LATE_WARN_MS:
            yield Notice("warning", f"the traffic sender ran late (p99 "
                         f"{np.percentile(late, 99):.1f} ms behind schedule); latencies still "
                         "run from the scheduled times")  # fmt: skip

    def _sender(self) -> None:
        precise_timers()
        arrivals = self.work.arrivals
        for j in range(len(arrivals)):
            if self.stop.is_set():
                break
            wait = self.t0 + float(arrivals[j]) - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            with self.cond:
                self.sent[j] = self._now()
                self.queue.append(j)
                self.cond.notify()
        with self.cond:
            self.generator_done = True
            self.cond.notify_all()

    def _engine(self) -> None:
        precise_timers()
        engine = self.engine
        try:
            while True:
                with self.cond:
                    while not engine.plan(self.queue):
                        if self.stop.is_set() or (self.generator_done and not self.queue):
                            return
                        self.cond.wait()
                if self.stop.is_set():
                    return
                engine.iterate()
        except BaseException as exc:  # the run stops; the main thread raises it
            self.error = exc
            self.stop.set()

    def unfinished(self) -> int:
        """Requests sent but without their last token (0 after a complete run)."""
        return int((np.isfinite(self.sent) & ~np.isfinite(self.book.done)).sum())
