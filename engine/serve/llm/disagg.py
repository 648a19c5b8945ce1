"""Prefill and decode on separate engines, for real: prefill engines run whole prompts
(IterationEngine with a handoff) and send each prefilled sequence's KV rows and first token
to the decode engines, which run decode-only continuous batching, as the simulator's
disaggregated layout schedules them (sim.py).

On this one machine the engines are threads sharing the ONNX Runtime session (with one
intra-op thread each, every pass runs on its own engine's thread). The KV cache really is
copied out of the prefill engine's buffer and into the decode engine's; the link between
instances is modelled: each prefill engine's link sends in turn, `kv_ms_per_mb` per MB of
cache, and a sequence lands (its first token reaches the user, it may join a decode batch)
when its transfer ends, exactly as the simulator books it."""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from engine.backends.genai.slots import SlotCache
from engine.serve.llm.instance import Book
from engine.serve.llm.iteration import IterationEngine


@dataclass(order=True)
class Landing:
    """A prefilled sequence on its way to a decode engine."""

    land: float  # when its transfer ends (schedule time, seconds)
    order: int  # ties in landing time keep the handoff order
    rid: int = field(compare=False)
    first: int = field(compare=False)  # its first token, made by the prefill
    rows: list[np.ndarray] = field(compare=False, repr=False)  # per cache buffer


class Links:
    """The prefill engines' links: each sends one sequence's cache at a time, in turn;
    landings wait in a heap, earliest first. Guarded by the loop's condition."""

    def __init__(self, count: int, seconds_per_token: float) -> None:
        self.free_at = [0.0] * count
        self.per_token = seconds_per_token
        self.landed: list[Landing] = []
        self._order = 0

    def send(self, link: int, t: float, rid: int, tokens: int, first: int,
             rows: list[np.ndarray]) -> float:  # fmt: skip
        start = max(t, self.free_at[link])
        land = self.free_at[link] = start + tokens * self.per_token
        self._order += 1
        heapq.heappush(self.landed, Landing(land, self._order, rid, first, rows))
        return land

    def next_land(self) -> float | None:
        return self.landed[0].land if self.landed else None


def prefill_handoff(
    engine: IterationEngine, link: int, links: Links, cond: threading.Condition
) -> Callable[[int, int, float], None]:
    """The handoff of prefill engine `link`: copy the sequence's rows out of its slot (the
    send), book its landing, and wake the decode engines."""

    def handoff(rid: int, slot: int, t: float) -> None:
        n = engine.book.prompt[rid]
        rows = [buf[slot, :, :n].copy() for buf in engine.slots.cache]
        first = engine.tokens[rid][-1]
        with cond:
            engine.book.first[rid] = links.send(link, t, rid, n, first, rows)
            cond.notify_all()

    return handoff


class DecodeEngine(IterationEngine):
    """Decode-only: at each iteration boundary it admits, in landing order, the sequences
    that have landed while a seat and KV room are free (their rows copied into a free
    slot); then one decode step for all."""

    def __init__(
        self, slots: SlotCache, book: Book, clock: Callable[[], float], *, max_seqs: int,
        kv_tokens: int, book_lock: threading.Lock,
    ) -> None:  # fmt: skip
        super().__init__(
            slots, book, _no_prompt, clock, budget=0, split=False, max_seqs=max_seqs,
            kv_tokens=kv_tokens, book_lock=book_lock,
        )  # fmt: skip

    def plan_landed(self, links: Links, now: float) -> bool:
        """Admit what has landed (under the caller's lock); False when nothing to run."""
        self.joined = []
        self.chunks = []
        landed = links.landed
        while landed and landed[0].land <= now and self.room(landed[0].rid):
            item = heapq.heappop(landed)
            rid, n = item.rid, self.book.prompt[item.rid]
            self.seats += 1
            self.kv += self._need(rid)
            slot = self.owner.index(-1)
            self.owner[slot], self.slot_of[rid], self.length[slot] = rid, slot, n
            for buf, row in zip(self.slots.cache, item.rows, strict=True):
                buf[slot, :, :n] = row  # the receive
            self.tokens[rid] = [item.first]
            self.decoding.add(rid)
            self.joined.append(rid)
        return bool(self.decoding)


def _no_prompt(rid: int) -> np.ndarray:
    raise AssertionError(f"a decode engine never prefills (request {rid})")
