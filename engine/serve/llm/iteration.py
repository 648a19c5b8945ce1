"""One LLM engine's iterations, scheduled exactly as the simulator's Instance schedules a
colocated or chunked instance (instance.py): at each iteration boundary the sequences
prefilled last iteration join the decode batch; waiting prompts are admitted in arrival
order while a seat (max_seqs) and KV budget (prompt + output reserved) are free, up to
`budget` prompt tokens per pass (whole prompts, or chunks when `split`); then the
iteration runs the prefill passes and one decode step for every sequence already
decoding. Every token made in an iteration is stamped with the iteration's end, as the
simulator stamps it, and recorded into the simulator's Book, so one summary counts both.

Real passes: each prompt (or chunk) is a batch-1 pass on its slot's row; the decode step
is one pass over slots 0..n-1, so decoding sequences are packed to the front first (a
copy of the cached tokens of each sequence moved; the simulator does not model it)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

import numpy as np

from engine.backends.genai.slots import SlotCache
from engine.serve.llm.instance import Book, plan_prompts
from engine.serve.llm.prefix_kv import PrefixKV

PROMPT_SALT = 0x9D0


def prompt_ids(seed: int, rid: int, length: int, low: int, vocab: int) -> np.ndarray:
    """Request `rid`'s prompt: seeded token ids (never special ones)."""
    rng = np.random.default_rng([seed, PROMPT_SALT, rid])
    return rng.integers(low, vocab, size=length, dtype=np.int64)


class IterationEngine:
    """`plan(queue)` under the caller's lock, then `iterate()` outside it."""

    def __init__(
        self,
        slots: SlotCache,
        book: Book,
        prompt_of: Callable[[int], np.ndarray],
        clock: Callable[[], float],
        *,
        budget: int,
        split: bool,
        max_seqs: int,
        kv_tokens: int,
        handoff: Callable[[int, int, float], None] | None = None,
        book_lock: threading.Lock | None = None,
        prefix: PrefixKV | None = None,
    ) -> None:
        """`handoff(rid, slot, t)`, when given, takes each prefilled sequence away (a
        disaggregated prefill engine) instead of decoding it here; `book_lock` guards the
        Book's per-stretch lists when several engines record into one Book."""
        self.slots, self.book, self.prompt_of, self.clock = slots, book, prompt_of, clock
        self.handoff = handoff
        self.prefix = prefix  # a prefix cache: prompts skip their cached leading blocks
        self._restore: dict[int, list[list[np.ndarray]]] = {}  # held rows to copy in
        self.book_lock = book_lock or threading.Lock()
        self.budget, self.split = budget, split
        self.max_seqs, self.kv_tokens = max_seqs, kv_tokens
        self.seats = 0
        self.kv = 0
        self.owner = [-1] * slots.slots  # slot -> request, -1 free
        self.length = np.zeros(slots.slots, np.int64)  # tokens cached in each slot
        self.slot_of: dict[int, int] = {}
        self.decoding: set[int] = set()
        self.prefilling: list[list[int]] = []  # [request, tokens done], in admission order
        self.joining: list[int] = []
        self.joined: list[int] = []
        self.chunks: list[tuple[list[int], int]] = []
        self.tokens: list[list[int]] = [[] for _ in book.arrival]
        self._ids: dict[int, np.ndarray] = {}
        self.prev_end = 0.0
        self.moves = 0  # rows copied to keep the decode batch packed
        # per iteration: start, end, decode batch, context summed, prompt tokens, passes,
        # the attention scores the prompt tokens compute (sum of k x end over the chunks),
        # the cached prompt tokens their passes read (sum of done); and of those, the
        # passes that continue a prompt (done > 0): their count, tokens and scores
        self.iterations: list[tuple[float, float, int, int, int, int, int, int, int, int, int]] = []

    # admission (the simulator's rules) ---------------------------------------------
    def _need(self, rid: int) -> int:
        """KV tokens a request reserves here: its prompt and output, or only its prompt
        on an engine that hands it off after the prefill (as the simulator books it)."""
        book = self.book
        return book.prompt[rid] + (book.output[rid] if self.handoff is None else 0)

    def room(self, rid: int) -> bool:
        return self.seats < self.max_seqs and self.kv + self._need(rid) <= self.kv_tokens

    def plan(self, queue: deque[int]) -> bool:
        """Choose the next iteration; False when there is nothing to run."""
        self.joined = self.joining
        self.decoding.update(self.joining)
        self.joining = []

        def admit(rid: int) -> None:
            self.seats += 1
            self.kv += self._need(rid)
            slot = self.owner.index(-1)
            self.owner[slot], self.slot_of[rid], self.length[slot] = rid, slot, 0

        chunks = plan_prompts(
            self.prefilling, queue, self.budget, self.book.prompt, self.split, self.room, admit,
            self._cached if self.prefix is not None else None,
        )  # fmt: skip
        self.chunks = chunks
        return bool(chunks or self.decoding)

    def _cached(self, rid: int) -> int:
        """A newly admitted prompt's tokens found in the prefix cache (copied into its slot
        when its first pass runs, in the iteration's time)."""
        assert self.prefix is not None
        ids = self._ids[rid] = self.prompt_of(rid)
        got, blocks = self.prefix.take(ids)
        if got:
            self._restore[rid] = blocks
        self.book.cached[rid] = got
        return got

    # one iteration -----------------------------------------------------------------
    def iterate(self) -> None:
        start = self.clock()
        book, slots = self.book, self.slots
        firsts: list[int] = []
        tokens = scores = past = 0
        l_passes = l_tokens = l_scores = 0  # the passes that continue a prompt
        for entry, k in self.chunks:
            rid, done = entry
            ids = self._ids.get(rid)
            if ids is None:
                ids = self._ids[rid] = self.prompt_of(rid)
            slot = self.slot_of[rid]
            held = self._restore.pop(rid, None)
            if held is not None and self.prefix is not None:
                self.prefix.restore(slots, slot, held)
            logits = slots.prefill(slot, ids[done : done + k], done)
            entry[1] += k
            tokens += k
            scores += k * entry[1]
            past += done
            if done:
                l_passes, l_tokens, l_scores = l_passes + 1, l_tokens + k, l_scores + k * entry[1]
            self.length[slot] = entry[1]
            if entry[1] == book.prompt[rid]:
                self.tokens[rid].append(int(logits.argmax()))
                firsts.append(rid)
                if self.prefix is not None:
                    self.prefix.keep(slots, slot, ids)
        n = len(self.decoding)
        ctx = 0
        if n:
            self._pack(n)
            owners = self.owner[:n]
            last = np.asarray([self.tokens[rid][-1] for rid in owners], np.int64)
            lengths = self.length[:n].copy()
            ctx = int(lengths.sum()) + n
            chosen = slots.decode(last, lengths).argmax(axis=-1)
            self.length[:n] += 1
        t = self.clock()
        if n:
            self._record_decode(t, owners, chosen)
        for rid in firsts:
            self.prefilling.remove(next(e for e in self.prefilling if e[0] == rid))
            del self._ids[rid]
            book.first[rid] = t
            if book.output[rid] == 1:
                book.done[rid] = t
                self._release(rid)
            elif self.handoff is not None:
                self.handoff(rid, self.slot_of[rid], t)
                self._release(rid)
            else:
                self.joining.append(rid)
        passes = len(self.chunks) + (1 if n else 0)
        self.iterations.append(
            (start, t, n, ctx, tokens, passes, scores, past, l_passes, l_tokens, l_scores)
        )
        self.prev_end = t

    def _record_decode(self, t: float, owners: list[int], chosen: np.ndarray) -> None:
        book, n = self.book, len(owners)
        gap = t - self.prev_end  # every decoder's previous token came at the last end
        with self.book_lock:  # one stretch's numbers together
            book.segment(gap, n - len(self.joined), gap, 0.0, 1, n)
        for rid in self.joined:
            book.first_gap[rid] = t - book.first[rid]
        for i, rid in enumerate(owners):
            out = self.tokens[rid]
            out.append(int(chosen[i]))
            if len(out) == book.output[rid]:
                book.done[rid] = t
                self.decoding.discard(rid)
                self._release(rid)

    def _release(self, rid: int) -> None:
        self.seats -= 1
        self.kv -= self._need(rid)
        slot = self.slot_of.pop(rid)
        self.owner[slot] = -1

    def _pack(self, n: int) -> None:
        """Decoding sequences into slots 0..n-1: each from above n into a hole below
        (a free slot, or a prefilling sequence's, which swaps with it)."""
        holes = [s for s in range(n) if self.owner[s] not in self.decoding]
        if not holes:
            return
        owner, length = self.owner, self.length
        srcs = [s for s in range(n, len(owner)) if owner[s] in self.decoding]
        for hole, src in zip(holes, srcs, strict=True):
            other = owner[hole]
            if other == -1:
                self.slots.move(src, hole, int(length[src]))
            else:
                self.slots.swap(src, int(length[src]), hole, int(length[hole]))
                self.slot_of[other] = src
            owner[hole], owner[src] = owner[src], other
            length[hole], length[src] = length[src], length[hole]
            self.slot_of[owner[hole]] = hole
            self.moves += 1
