"""Which points an LLM calibration measures, and when each has been measured enough: a pure
plan from what the study simulates (its longest prompt, its largest decode batch, a chunked
layout's chunk), the rounds measured so far kept per point (a cancelled calibration keeps
them, the next one continues from them), a repeat-spread stop, and the seconds left
estimated from the rounds' own times.

The cost model (cost.py) fits: prefill a + b*L + c*L^2 (four lengths up to the longest
prompt, rounded up to a grid so nearby workloads share points), decode steps at the batch
sizes the layouts reach (up to 8, interpolated and extended beyond) and at two longer
contexts (the per-token slope), a chunked engine's passes (its chunk size, built to the
longest prompt, and two small sizes at the ends), and the extras after a prefill and a
pause, the loop's own work and an idle engine's start."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

REF_CONTEXT = 64  # each sequence's context when the batch sizes are timed
STEPS = 12  # timed decode steps per round
DECODE_BATCHES = (1, 2, 4, 8)
SMALL_CHUNK = 16  # a chunked engine's smallest pass timed (a prompt's remainder)
AFTER_LENGTHS = (16, 64, 256)  # prefill passes before which decode steps are timed
AFTER_PAUSES_MS = (1, 5, 20, 50)  # idle pauses after which passes are timed, ms
SPREAD_OK = 0.05  # a point's rounds agree this well (IQR / median): measured enough
MIN_PROMPT_GRID = 64


@dataclass(frozen=True)
class Needs:
    """What a study's simulation reads from the calibration: its longest prompt, the most
    sequences one decode step holds, and a chunked layout's chunk (0: none)."""

    prompt_max: int
    max_batch: int
    chunk: int = 0


@dataclass(frozen=True)
class Point:
    """One thing timed, in rounds: `kind` and its numbers `args`; done after `max_rounds`,
    or after `min_rounds` once the rounds agree within SPREAD_OK."""

    key: str
    kind: str  # prefill | decode | chunks | after | pause | prompt_pause | own | idle
    args: tuple[int, ...]
    min_rounds: int
    max_rounds: int

    def work(self) -> float:
        """A round's work in prompt-token passes, for the first estimate of its time before
        any round of it is timed (a decode step of one sequence ~ 16 prompt tokens)."""
        step = 16.0
        a = self.args
        if self.kind == "prefill":
            return float(a[0])
        if self.kind == "decode":
            return (STEPS + 1) * (step + a[0])  # its context is prefilled once, untimed
        if self.kind == "chunks":
            return float(a[1] + 6 * SMALL_CHUNK)
        if self.kind in ("after", "pause"):  # steps of 2 sequences after each, the prompts
            return (4 + 8 * (len(a) + 1)) * (step + 2) + (sum(a) if self.kind == "after" else 0)
        if self.kind == "prompt_pause":
            return (6 + 4 * len(a)) * 64.0
        if self.kind == "own":
            return 4 * REF_CONTEXT + (STEPS + 1) * (step + 4)
        return 16 * 12.0  # idle: the loop serving short requests


def grid_up(n: int) -> int:
    """The smallest of 64, 96, 128, 192, 256, 384, ... at least `n` (2^k and 1.5 * 2^k):
    nearby workloads share their prefill points, at most 1.5x longer than asked."""
    if n <= MIN_PROMPT_GRID:
        return MIN_PROMPT_GRID
    k = math.floor(math.log2(n))
    for g in (1 << k, 3 << (k - 1), 1 << (k + 1)):
        if g >= n:
            return g
    return 1 << (k + 1)


def plan_points(needs: Needs, context_length: int, fixed_rounds: int = 0) -> list[Point]:
    """The points to measure for `needs` on a model of `context_length` tokens, in the order
    a round visits them. `fixed_rounds` > 0: every point that many rounds (tests)."""
    room = context_length - 2 * (STEPS + 1) * 6 - 8  # a decode point's steps after its context
    hi = min(grid_up(max(1, needs.prompt_max)), max(16, room))
    lengths = sorted({max(1, n) for n in (16, hi // 4, hi // 2, hi) if n < context_length - 1})
    batches = [b for b in DECODE_BATCHES if b <= max(1, needs.max_batch)]
    if needs.max_batch < DECODE_BATCHES[-1] and needs.max_batch not in batches:
        batches.append(needs.max_batch)
    contexts = sorted({c for c in (max(hi // 2, 2 * REF_CONTEXT), max(hi, 4 * REF_CONTEXT))
                       if c < room})  # fmt: skip

    def rounds(lo: int, most: int) -> tuple[int, int]:
        return (fixed_rounds, fixed_rounds) if fixed_rounds else (lo, most)

    out = [Point(f"prefill {n}", "prefill", (n,), *rounds(3, 5)) for n in lengths]
    out += [Point(f"decode {b}x{REF_CONTEXT}", "decode", (b, REF_CONTEXT, 0), *rounds(3, 5))
            for b in batches]  # fmt: skip
    out += [Point(f"decode 1x{c}", "decode", (1, c, 1), *rounds(3, 5)) for c in contexts]
    if needs.chunk:
        chunk = max(SMALL_CHUNK, min(needs.chunk, hi))
        span = max(chunk, (hi // chunk) * chunk)
        out.append(Point(f"chunks {chunk} to {span}", "chunks", (chunk, span), *rounds(2, 3)))
    after = tuple(n for n in AFTER_LENGTHS if n <= hi)
    pauses = tuple(int(ms) for ms in AFTER_PAUSES_MS)
    # the key names the lengths: a longer study's plan has more, and rounds kept from a
    # shorter one hold none of the new length's steps
    out.append(Point(f"after prefills {'/'.join(map(str, after))}", "after", after,
                     *rounds(3, 4)))  # fmt: skip
    out.append(Point("after pauses", "pause", pauses, *rounds(3, 4)))
    out.append(Point("prompts after pauses", "prompt_pause", pauses, *rounds(3, 4)))
    out.append(Point("own work", "own", (), *rounds(2, 3)))
    out.append(Point("idle start", "idle", (), 1, 1))
    return out


def round_value(kind: str, rnd: dict[str, Any]) -> float:
    """One round's summary, ms: what its repeats are compared by (the median pass; for
    the passes after prefills or pauses, the median of their baseline)."""
    values = rnd["base"] if isinstance(rnd.get("ms"), dict) else rnd.get("ms")
    return float(np.median(values)) if values else math.nan


def spread(values: list[float]) -> float:
    """The rounds' relative spread: interquartile range over median (0 for one round)."""
    v = np.asarray([x for x in values if math.isfinite(x)], np.float64)
    if v.size < 2 or float(np.median(v)) <= 0:
        return 0.0
    q1, q2, q3 = np.percentile(v, [25, 50, 75])
    return float((q3 - q1) / q2)


def is_done(point: Point, rounds: list[dict[str, Any]]) -> bool:
    """Measured enough: every round it may take, or its least once they agree."""
    n = len(rounds)
    if n >= point.max_rounds:
        return True
    if n < point.min_rounds:
        return False
    return spread([round_value(point.kind, r) for r in rounds]) <= SPREAD_OK


@dataclass
class Estimate:
    """Seconds left of a calibration from the rounds' own times: a point timed already costs
    its mean round; one not yet, its work at the rate of those timed (none timed: None)."""

    points: list[Point]
    seconds: dict[str, list[float]]  # key -> each round's seconds (this run and before)

    def rate(self) -> float | None:
        """Seconds per unit of work, over every round timed."""
        work = sum(p.work() * len(self.seconds.get(p.key, [])) for p in self.points)
        secs = sum(sum(self.seconds.get(p.key, [])) for p in self.points)
        return secs / work if work > 0 and secs > 0 else None

    def left_s(self, rounds: dict[str, list[dict[str, Any]]]) -> float | None:
        """Seconds until every point is done (a point not done yet: at least one round more,
        and its least)."""
        rate = self.rate()
        total = 0.0
        for p in self.points:
            have = rounds.get(p.key, [])
            if is_done(p, have):
                continue
            more = max(p.min_rounds - len(have), 1)
            took = self.seconds.get(p.key, [])
            if took:
                total += more * float(np.mean(took))
            elif rate is None:
                return None
            else:
                total += more * p.work() * rate
        return total


def needs_from(prompts: Any, layouts: list[Any]) -> Needs:
    """A study's needs from its requests' prompt lengths and its layouts (sim.Layout)."""
    longest = int(np.max(prompts)) if len(prompts) else 1
    batch = max((int(x.max_seqs) for x in layouts), default=1)
    chunk = max((int(x.chunk_tokens) for x in layouts if x.name == "chunked"), default=0)
    return Needs(longest, batch, chunk)
