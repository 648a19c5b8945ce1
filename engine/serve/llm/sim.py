"""A discrete-event simulator of LLM serving in three layouts, calibrated on the real
engine (LLMCost):

- colocated: each instance prefills waiting prompts whole (up to `prefill_tokens` per
  pass) in the same iteration as its decode step: a long prompt stalls every running
  sequence's next token;
- chunked: at most `chunk_tokens` prompt tokens ride along with each decode step
  (Sarathi-Serve), so a stall is bounded by one chunk's time;
- disaggregated: prefill instances run batches of whole prompts; each prompt's KV cache
  then crosses a link (one per prefill instance, transfers in turn, `kv_ms_per_mb`) to
  the decode instances, which run decode-only continuous batching. The first token goes
  with the cache and reaches the user when it lands: the transfer is part of TTFT.

Requests arrive from the serving lab's traffic schedules (LLMWorkload); instances take
them in arrival order from a shared queue at their iteration boundaries, up to `max_seqs`
sequences and `kv_tokens` of reserved KV cache each (a sequence reserves its prompt and
its output when admitted, so none is ever preempted)."""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from engine.errors import ConfigError
from engine.serve.llm.cost import LLMCost
from engine.serve.llm.instance import Book, Instance, PrefixUse
from engine.serve.llm.prefix_cache import PrefixCache
from engine.serve.llm.requests import LLMWorkload

LAYOUTS = ("colocated", "chunked", "disaggregated")
MAX_INSTANCES = 256  # instances of each kind
MAX_SEQS = 65_536  # sequences running at once per instance
MAX_TOKENS = 1 << 24  # chunk, prefill budget and KV cache, in tokens


@dataclass(frozen=True)
class Layout:
    name: str
    instances: int = 1  # colocated, chunked
    chunk_tokens: int = 256  # chunked: prompt tokens per iteration
    prefill_tokens: int = 2048  # colocated, disaggregated: prompt tokens per whole-prompt pass
    max_seqs: int = 64  # per instance
    kv_tokens: int = 0  # per instance; 0: as many as max_seqs sequences can hold
    prefill_instances: int = 1  # disaggregated
    decode_instances: int = 1
    kv_ms_per_mb: float = 0.0  # disaggregated: link time per MB (1e6 bytes) of KV cache

    def check(self) -> None:
        if self.name not in LAYOUTS:
            raise ConfigError(f"layout {self.name!r}: expected one of {', '.join(LAYOUTS)}")
        counts = {"--instances": (self.instances, MAX_INSTANCES),
                  "--chunk-tokens": (self.chunk_tokens, MAX_TOKENS),
                  "--prefill-tokens": (self.prefill_tokens, MAX_TOKENS),
                  "--max-seqs": (self.max_seqs, MAX_SEQS),
                  "--prefill-instances": (self.prefill_instances, MAX_INSTANCES),
                  "--decode-instances": (self.decode_instances, MAX_INSTANCES)}  # fmt: skip
        for flag, (value, most) in counts.items():
            if not 1 <= value <= most:
                raise ConfigError(f"{flag} must be from 1 to {most:,}, got {value}")
        if self.kv_tokens > MAX_TOKENS:
            raise ConfigError(f"--kv-tokens must be at most {MAX_TOKENS:,}, got {self.kv_tokens}")
        if self.kv_tokens < 0 or not (self.kv_ms_per_mb >= 0 and math.isfinite(self.kv_ms_per_mb)):
            raise ConfigError("the KV budget and the KV transfer time must not be negative")

    @property
    def total_instances(self) -> int:
        if self.name == "disaggregated":
            return self.prefill_instances + self.decode_instances
        return self.instances

    def describe(self) -> str:
        if self.name == "chunked":
            return f"chunked {self.chunk_tokens}"
        if self.name == "disaggregated":
            return f"disagg {self.prefill_instances}P+{self.decode_instances}D"
        return "colocated"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "label": self.describe()}


PROGRESS_S = 1.0  # how often, at most, `progress` hears how far the simulation is
PROGRESS_EVERY = 4096  # events between looks at the clock


def simulate_llm(
    work: LLMWorkload,
    layout: Layout,
    cost: LLMCost,
    progress: Callable[[int, int], None] | None = None,
    prefix_blocks: int = 0,
    stepwise: bool = False,
) -> Book:
    """Every request served to its last token; what each saw, in the returned Book.
    `progress(finished, total)`, when given, is called at most every PROGRESS_S of wall
    time (a million requests take tens of seconds). `prefix_blocks`: each instance that
    prefills keeps a prefix cache of that many blocks (the workload's blocks). `stepwise`:
    every decode step its own event, not stretches in closed form (the same results,
    slower: the reference for tests)."""
    layout.check()
    book = Book(work.arrivals.tolist(), work.prompt.tolist(), work.output.tolist())
    if prefix_blocks and work.blocks is None:
        raise ConfigError("a prefix cache needs prompts that share prefixes: --shared-prefix "
                          "GROUPS,TOKENS, or a trace with hash_ids (Mooncake)")  # fmt: skip
    book.prefix_blocks = prefix_blocks
    longest = max((p + o for p, o in zip(book.prompt, book.output, strict=True)), default=0)
    kv_tokens = layout.kv_tokens or layout.max_seqs * max(longest, 1)
    if longest > kv_tokens:
        raise ConfigError(f"a request of {longest} tokens does not fit the KV budget of "
                          f"{kv_tokens} tokens (--kv-tokens)")  # fmt: skip
    events: list[tuple[float, int, int, int]] = []  # (time, order, instance or -1, version)
    order = itertools.count()  # ties in time: the order scheduled
    push = heapq.heappush

    def schedule(t: float, inst: Instance) -> None:
        push(events, (t, next(order), inst.key, inst.version))

    waiting: deque[int] = deque()
    ready: deque[int] = deque()
    links: list[float] = []
    per_token_s = layout.kv_ms_per_mb / 1e3 * cost.kv_bytes_per_token / 1e6
    prefillers: list[Instance]
    decoders: list[Instance] = []

    def make(prompts: deque[int] | None, budget: int, split: bool, **kw: Any) -> Instance:
        if prompts is not None and prefix_blocks and work.blocks is not None:
            cache = PrefixCache(prefix_blocks, work.block_tokens)
            kw["prefix"] = PrefixUse(cache, work.blocks, book)
        return Instance(book, cost, schedule, prompts=prompts, budget=budget, split=split,
                        max_seqs=layout.max_seqs, kv_tokens=kv_tokens, stepwise=stepwise,
                        **kw)  # fmt: skip

    if layout.name == "disaggregated":

        def handoff_from(k: int) -> Callable[[int, float], None]:
            def handoff(rid: int, t: float) -> None:
                start = max(t, links[k])
                links[k] = start + book.prompt[rid] * per_token_s
                book.first[rid] = links[k]  # the first token travels with the KV cache
                push(events, (links[k], next(order), -1, rid))

            return handoff

        links = [0.0] * layout.prefill_instances
        prefillers = [
            make(waiting, layout.prefill_tokens, False, handoff=handoff_from(k))
            for k in range(layout.prefill_instances)
        ]
        decoders = [make(None, 0, False, arrivals=ready) for _ in range(layout.decode_instances)]
    else:
        split = layout.name == "chunked"
        budget = layout.chunk_tokens if split else layout.prefill_tokens
        prefillers = [make(waiting, budget, split) for _ in range(layout.instances)]
    instances = prefillers + decoders
    for k, inst in enumerate(instances):
        inst.key = k
    offers = _Offer(prefillers, waiting), _Offer(decoders, ready)
    arrivals, n, i = book.arrival, len(book.arrival), 0
    inf = math.inf
    steps, said = 0, time.monotonic()
    while True:
        steps += 1
        if (
            progress is not None
            and steps % PROGRESS_EVERY == 0
            and time.monotonic() - said >= PROGRESS_S
        ):
            said = time.monotonic()
            progress(n - sum(map(math.isnan, book.done)), n)
        ta = arrivals[i] if i < n else inf
        te = events[0][0] if events else inf
        if ta == inf and te == inf:
            break
        if ta <= te:  # every request arriving at this instant queues before any is taken
            fresh = not waiting  # else its head was offered, and nothing has changed since
            while i < n and arrivals[i] == ta:
                waiting.append(i)
                i += 1
            if fresh:
                offers[0].wake(ta)
            continue
        t, _, k, tag = heapq.heappop(events)
        if k < 0:  # a KV transfer landed: the sequence can decode
            fresh = not ready  # as for arrivals
            ready.append(tag)
            if fresh:
                offers[1].wake(t)
            continue
        inst = instances[k]
        if tag != inst.version or not inst.busy:
            continue  # a stretch that was cut short
        offer = offers[inst.arrivals is not None]  # the queue it takes from
        queue = offer.queue
        head = queue[0] if queue else -1
        inst.complete(t)
        inst.plan(t)
        offer.after(inst, head, t)
    return book


class _Offer:
    """A queue (prompts waiting, or sequences whose KV cache landed) and the instances that
    take from it. `wake(t)`: idle instances with room start at once, then the busy one
    with room whose next step ends first ends its decode-only stretch there (the
    step-by-step loop's first boundary to take the head). Cutting only that one is exact:
    the others have no boundary before it; `after` offers the queue again when a boundary
    changed its head, or was that one's and left the head waiting."""

    def __init__(self, instances: list[Instance], queue: deque[int]) -> None:
        self.instances, self.queue = instances, queue
        self.chosen: Instance | None = None

    def wake(self, t: float, idle: bool = True) -> None:
        """`idle`: start idle instances first (after a boundary there are none: an idle
        instance has room for anything, so it took the head when it planned)."""
        queue = self.queue
        for inst in self.instances if idle else ():
            if not queue:
                return
            if not inst.busy and inst.room(queue[0]):
                inst.plan(t)
        if not queue:
            return
        head, best, first = queue[0], None, (math.inf, 0)
        for inst in self.instances:
            if inst.busy and inst.room(head):
                at = inst.boundary(t)
                if at[0] < first[0]:
                    best, first = inst, at
        self.chosen = best
        if best is not None:
            best.cut(*first)

    def after(self, inst: Instance, head: int, t: float) -> None:
        """`inst` planned at its boundary `t`; the queue's head was `head` (-1: empty)."""
        queue = self.queue
        if queue and (inst is self.chosen or queue[0] != head):
            self.wake(t, idle=False)
