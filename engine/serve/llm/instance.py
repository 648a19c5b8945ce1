"""One LLM engine instance under iteration-level (continuous) batching, as Orca and vLLM
schedule it: at every iteration boundary, sequences join and leave; an iteration runs a
prefill pass over prompt tokens (whole prompts, or chunks of at most C tokens) and one
decode step for every running sequence, its time the sum of the two passes (on this
engine they are two passes; a fused kernel would overlap them).

Decode-only stretches are advanced in closed form: with the batch fixed, each step's time
grows by a constant (the context grows one token per sequence), and the first steps after
a prefill pass or a pause add their calibrated extras, so the instance jumps to the step
where the next sequence finishes; a new arrival cuts the stretch short at the first step
that ends after it (of the one instance whose step ends first, sim._Offer). A prompt
iteration's cost is remembered by its passes and the engine's settled warmth
(LLMCost.settle): fixed-length workloads repeat a few shapes. A simulation is then events
per request, not per token; `stepwise` makes every decode step its own event (the
reference a test holds the jumps to)."""

from __future__ import annotations

import heapq
import math
from array import array
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from engine.serve.llm.cost import SETTLED_WARMTH, LLMCost, Warmth
from engine.serve.llm.prefix_cache import PrefixCache

ITERATIONS_KEPT = 1 << 16  # prompt iterations remembered per instance (then forgotten)
SEGMENT = 6  # numbers per booked stretch (Book.segs)
_NONE: list[tuple[list[int], int]] = []  # no prompt work (never appended to)


@dataclass
class Book:
    """Per request and per stretch of iterations, what the simulation saw (seconds)."""

    arrival: list[float]
    prompt: list[int]
    output: list[int]
    first: list[float] = field(default_factory=list)  # the first token (end of its prefill)
    done: list[float] = field(default_factory=list)  # the last token
    first_gap: list[float] = field(default_factory=list)  # first token -> second token
    # stretches of iterations with decoders, SEGMENT numbers each: the first gap and the
    # sequences it counts for (those not joining there), then m - 1 more gaps d0 + k*dd,
    # each for `batch` sequences (one packed array: a simulation books millions, and one
    # extend per stretch keeps a stretch's numbers together for a reader in another thread)
    segs: array[float] = field(default_factory=lambda: array("d"))
    # the stretches whose first steps paid extras (after a prefill, after a pause): pairs
    # of the stretch's index and its row in `extra_rows`, whose k-th extra (s) its gap k
    # adds (k = 1 .. the row's end or the stretch's, whichever is first; step 0's is in
    # `first` already). The summary spreads them (numpy), not the simulation's loop
    paid: array[int] = field(default_factory=lambda: array("q"))
    extra_rows: list[tuple[float, ...]] = field(default_factory=list)
    cached: list[int] = field(default_factory=list)  # prompt tokens a prefix cache gave
    prefix_blocks: int = 0  # the prefix cache's size per instance (0: none)

    def __post_init__(self) -> None:
        n = len(self.arrival)
        nan = math.nan
        self.first, self.done, self.first_gap = [nan] * n, [nan] * n, [nan] * n
        self.cached = [0] * n
        self.held = [p + o for p, o in zip(self.prompt, self.output, strict=True)]
        self._rows: dict[int, int] = {}  # id of an extras row -> its index in extra_rows

    def segment(self, first: float, first_w: int, d0: float, dd: float, m: int, batch: int) -> None:
        """Book a stretch: its first gap for `first_w` sequences, then `m` - 1 gaps
        d0 + k*dd (k = 1..m-1) for `batch` each."""
        self.segs.extend((first, first_w, d0, dd, m, batch))

    def segments(self) -> np.ndarray:
        """The stretches booked, one row each: first, first_w, d0, dd, m, batch."""
        return np.array(self.segs, np.float64).reshape(-1, SEGMENT)

    def row_of(self, extra: tuple[float, ...]) -> int:
        """`extra`'s index in extra_rows (booked once: the cost model's rows are few)."""
        got = self._rows.get(id(extra))
        if got is None:
            got = self._rows[id(extra)] = len(self.extra_rows)
            self.extra_rows.append(extra)  # kept: its id stays its own
        return got


@dataclass
class PrefixUse:
    """An instance's prefix cache and the workload's prompt blocks: `start(rid)`, the
    tokens of a prompt found cached when it is admitted (booked); `prefilled(rid)`, its
    blocks kept once its prefill is done."""

    cache: PrefixCache
    blocks: tuple[tuple[int, ...], ...]
    book: Book

    def start(self, rid: int) -> int:
        got = self.cache.match(self.blocks[rid], self.book.prompt[rid])
        self.book.cached[rid] = got
        return got

    def prefilled(self, rid: int) -> None:
        self.cache.insert(self.blocks[rid], self.book.prompt[rid])


class Instance:
    """Prefills from `prompts` (a queue shared by the instances that prefill) and/or
    decodes; `handoff(rid, t)`, when given, takes each prefilled sequence away (to a
    decode instance) instead of decoding it here; `arrivals` feeds a decode-only
    instance sequences whose first token is already made."""

    def __init__(
        self,
        book: Book,
        cost: LLMCost,
        schedule: Callable[[float, Instance], None],
        *,
        prompts: deque[int] | None,
        budget: int,
        split: bool,
        max_seqs: int,
        kv_tokens: int,
        handoff: Callable[[int, float], None] | None = None,
        arrivals: deque[int] | None = None,
        prefix: PrefixUse | None = None,
        stepwise: bool = False,
    ) -> None:
        self.book, self.cost, self.schedule = book, cost, schedule
        self.prefix = prefix
        self.prompts, self.arrivals, self.handoff = prompts, arrivals, handoff
        self.budget, self.split = budget, split
        self.max_seqs, self.kv_tokens = max_seqs, kv_tokens
        self.base = [ms / 1e3 for ms in cost.base_table(max_seqs)]  # seconds, as all times here
        self.slope = cost.decode_slope_ms / 1e3
        self.own = cost.iteration_ms / 1e3  # the loop's own work in every iteration
        self.wake = cost.idle_start_ms / 1e3  # an idle engine's start of new work
        self.it = 0  # iterations run
        self.batch = 0  # sequences decoding
        self.ctx = 0  # their contexts summed (what the next step attends to)
        self.finishes: list[tuple[int, int]] = []  # (iteration of the last token, request)
        self.exit_ctx: dict[int, int] = {}
        self.seats = 0  # sequences admitted (prefilling, joining or decoding)
        self.kv = 0  # KV tokens reserved
        self.prefilling: list[list[int]] = []  # [request, tokens done], in admission order
        self.joining: list[int] = []
        self.busy = False
        self.key = 0  # the simulation's index of this instance (its events carry it)
        self.version = 0
        self.end = 0.0
        # the stretch running now
        self._t0 = self._first = self._d0 = self._dd = 0.0
        self._m = 0
        self._chunks: list[tuple[list[int], int]] = []
        self._joined: list[int] = []  # sequences whose first decode step is this stretch's
        self._cached = prefix.start if prefix is not None else None
        self.idle_from: float | None = 0.0  # idle since then (None: busy or between passes)
        self._warm = SETTLED_WARMTH  # the extras still due after a prefill pass or a pause
        # a prompt iteration's extras and prompt passes (s) and the warmth after it, by its
        # warmth, its passes' (done, tokens) and whether a decode step rides along
        self._iterations: dict[tuple[Warmth, tuple[tuple[int, int], ...], bool],
                               tuple[float, float, Warmth]] = {}  # fmt: skip
        self._extra: tuple[float, ...] = ()  # a decode-only stretch's extras, step by step (s)
        self._cum: tuple[float, ...] = ()  # and summed
        self.stepwise = stepwise  # every decode step its own event (the reference)
        # KV tokens a request reserves here: its prompt and output, or its prompt only
        # when a decode instance takes it after its prefill
        self._needs = book.prompt if handoff is not None else book.held
        self._stretch = False  # the work running now is decode-only steps in closed form

    # admission ---------------------------------------------------------------------
    def room(self, rid: int) -> bool:
        return self.seats < self.max_seqs and self.kv + self._needs[rid] <= self.kv_tokens

    def _join(self, rid: int) -> None:
        book = self.book
        start = book.prompt[rid] + 1  # the prompt and the first token
        self.batch += 1
        self.ctx += start
        out = book.output[rid]
        heapq.heappush(self.finishes, (self.it + out - 1, rid))  # decode steps it+1..
        self.exit_ctx[rid] = start + out - 1

    # one stretch -------------------------------------------------------------------
    def plan(self, t: float) -> None:
        """At an iteration boundary (or idle, woken at `t`): choose the next stretch."""
        joined = self._joined = self.joining  # prefilled in the last iteration: decode now
        self.joining = []
        for rid in joined:
            self._join(rid)
        src = self.arrivals
        if src:  # a decode instance: sequences whose KV cache landed
            while src and self.room(src[0]):
                rid = src.popleft()
                self.seats += 1
                self.kv += self._needs[rid]
                self._join(rid)
                joined.append(rid)
        chunks = self._chunks = _NONE
        waiting = self.prompts  # a prefiller's: prompts started, or waiting
        if waiting is not None and (self.prefilling or waiting):
            chunks = self._chunks = plan_prompts(
                self.prefilling, waiting, self.budget, self.book.prompt, self.split,
                self.room, self._admit, self._cached,
            )  # fmt: skip
        batch = self.batch
        if not chunks and not batch:
            self.busy = False
            if self.idle_from is None:
                self.idle_from = t
            return
        if self.idle_from is not None:  # the first pass after a pause pays for it
            self._warm = self.cost.settle(self._warm.paused((t - self.idle_from) * 1e3))
            self.idle_from = None
            t += self.wake  # and starts that much after what woke the engine
        d0 = self.base[batch] + self.slope * self.ctx + self.own if batch else 0.0
        self._t0, self._d0 = t, d0
        self._stretch = stretch = not chunks and not self.stepwise
        if not stretch:  # one iteration: prompt passes and/or a decode step
            shape = tuple([(e[1], k) for e, k in chunks])
            key = (self._warm, shape, batch > 0)
            got = self._iterations.get(key)
            if got is None:
                got = self._iteration(*key)
                if len(self._iterations) >= ITERATIONS_KEPT:
                    self._iterations.clear()
                self._iterations[key] = got
            extra, pre, self._warm = got
            first = d0 + extra
            if chunks:
                first += pre
            self._first, self._m, self._dd = first, 1, 0.0
            self._extra = self._cum = ()
            self._start(t + first)
            return
        # decode-only steps to the next finish, in one event (closed form)
        m = self.finishes[0][0] - self.it
        self._extra, self._cum = self.cost.decode_extras_rows(self._warm)  # to their ends
        self._first, self._m, self._dd = d0, m, self.slope * batch
        self._start(self._end_of(m))

    def _iteration(
        self, warm: Warmth, shape: tuple[tuple[int, int], ...], decode: bool
    ) -> tuple[float, float, Warmth]:
        """A prompt iteration's extras (s), its prompt passes with the loop's own work when
        no decode step carries it (s), and the warmth after it."""
        cost = self.cost
        tokens = sum([k for _, k in shape])
        extra, warm = cost.iteration_extra_ms(warm, len(shape), tokens, decode, self.split)
        pre = cost.prefill_pass_ms(list(shape), self.split) / 1e3 + (0.0 if decode else self.own)
        return extra / 1e3, pre, cost.settle(warm)

    def _admit(self, rid: int) -> None:
        """plan_prompts started prompt `rid` here: its seat and KV tokens."""
        self.seats += 1
        self.kv += self._needs[rid]

    def _end_of(self, k: int) -> float:
        end = self._t0 + self._first + (k - 1) * self._d0 + self._dd * (k * (k - 1) / 2)
        cum = self._cum  # the extras of the stretch's first steps, summed
        return end + cum[min(k, len(cum)) - 1] if cum else end

    def _start(self, end: float) -> None:
        self.busy = True
        self.end = end
        self.version += 1
        self.schedule(end, self)

    def boundary(self, t: float) -> tuple[float, int]:
        """When a busy instance could next take new work that arrived at `t`: the end of
        the first step of its stretch that ends at or after `t`, and that step's number
        (the stretch's end when it runs one iteration)."""
        m = self._m
        if m <= 1 or self._chunks:
            return self.end, m
        d0, dd = self._d0, self._dd
        # end_of is increasing in k: the smallest k with end_of(k) >= t, from where the
        # arithmetic part reaches t (dd/2 k^2 + (d0 - dd/2) k = t - t0 - first + d0)
        rhs = t - self._t0 - self._first + d0
        if dd > 0:
            b = d0 - dd / 2
            guess = (-b + math.sqrt(max(b * b + 2 * dd * rhs, 0.0))) / dd
        else:
            guess = rhs / d0 if d0 > 0 else 1.0
        lo = min(max(math.ceil(guess), 1), m)
        while lo > 1 and self._end_of(lo - 1) >= t:
            lo -= 1
        while lo < m and self._end_of(lo) < t:
            lo += 1
        return (self.end, m) if lo == m else (self._end_of(lo), lo)

    def cut(self, end: float, k: int) -> None:
        """End the decode-only stretch after its step `k` (at `end`, from `boundary`)."""
        if k < self._m:
            self._m = k
            self._start(end)

    def complete(self, t: float) -> None:
        """The stretch ended at `t`: tokens made, sequences finished, prompts prefilled."""
        book, m, batch = self.book, self._m, self.batch
        if batch:
            self._segments(m, batch)
            if self._joined:  # their first gap: to the end of the stretch's first step
                first_end = self._end_of(1)
                for rid in self._joined:
                    book.first_gap[rid] = first_end - book.first[rid]
        if self._stretch and self._warm is not SETTLED_WARMTH:  # its steps' extras are paid
            warm = self.cost.settle(self._warm.stepped(m))
            self._warm = SETTLED_WARMTH if warm == SETTLED_WARMTH else warm
        self.it += m
        self.ctx += m * batch
        fin = self.finishes
        while fin and fin[0][0] == self.it:
            _, rid = heapq.heappop(fin)
            self.ctx -= self.exit_ctx.pop(rid)
            self.batch -= 1
            self._release(rid)
            book.done[rid] = t
        for entry, k in self._chunks:
            entry[1] += k
            rid = entry[0]
            if entry[1] < book.prompt[rid]:
                continue
            self.prefilling.remove(entry)
            book.first[rid] = t
            if self.prefix is not None:
                self.prefix.prefilled(rid)
            if book.output[rid] == 1:
                book.done[rid] = t
                self._release(rid)
            elif self.handoff is not None:
                self._release(rid)
                self.handoff(rid, t)
            else:
                self.joining.append(rid)
        self.busy = False

    def _segments(self, m: int, batch: int) -> None:
        """The stretch's steps for the inter-token gaps (metrics): its first step (the
        sequences that joined in it have their own first gap) and the arithmetic run of
        the rest, with the row of extras its first steps paid (Book.paid)."""
        extra, book = self._extra, self.book
        first = self._first + extra[0] if extra else self._first
        book.segs.extend((first, batch - len(self._joined), self._d0, self._dd, m, batch))
        if m > 1 and len(extra) > 1:
            book.paid.extend((len(book.segs) // SEGMENT - 1, book.row_of(extra)))

    def _release(self, rid: int) -> None:
        self.seats -= 1
        self.kv -= self._needs[rid]


def plan_prompts(
    prefilling: list[list[int]],
    waiting: deque[int],
    budget: int,
    prompt: list[int] | np.ndarray,
    split: bool,
    room: Callable[[int], bool],
    admit: Callable[[int], None],
    start: Callable[[int], int] | None = None,
) -> list[tuple[list[int], int]]:
    """An iteration's prompt work, the same rule for the simulator and the real loop: the
    prompts already started first (chunked), in order, then waiting ones while the budget of
    prompt tokens and `room` (seats, KV tokens) allow; whole prompts (not `split`) never
    share a pass with one that does not fit. `admit(rid)` books a newly started request;
    each entry is [request, tokens prefilled so far], appended to `prefilling`; `start(rid)`,
    when given, the tokens of a newly started prompt already cached (a prefix cache's hit),
    which its prefill skips."""
    chunks: list[tuple[list[int], int]] = []
    for entry in prefilling:
        if budget <= 0:
            return chunks
        k = min(int(prompt[entry[0]]) - entry[1], budget)
        chunks.append((entry, k))
        budget -= k
    while budget > 0 and waiting and room(waiting[0]):
        rid = waiting[0]
        length = int(prompt[rid])
        if not split and length > budget and chunks:  # (a cached prefix not yet known)
            break  # whole prompts: this one goes in the next pass
        waiting.popleft()
        admit(rid)
        done = start(rid) if start is not None else 0
        entry = [rid, done]
        prefilling.append(entry)
        k = length - done if not split else min(length - done, budget)
        chunks.append((entry, k))
        budget -= k
    return chunks
