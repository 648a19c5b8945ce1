"""INT8 that keeps its promise: when the default quantization misses the accuracy target,
try the settings that suit this CPU, keep the fastest that meets it; when none does, keep
the nodes that lose the most accuracy in FP32, a few more each round, until it holds or
nothing is left worth excluding. Every attempt is kept.

The search only orders work; building, scoring and ranking nodes are given to it, so it is
tested without a model and reads the same for any quantizer.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Collection, Generator
from dataclasses import dataclass, field
from typing import Any

from engine.errors import ModelError
from engine.events import Event, Notice, Progress, VariantReady

MAX_ROUNDS = 6  # exclusion rounds: 1, 2, 4, 8, 16, 32 more nodes
MAX_EXCLUDED_SHARE = 0.5  # past half the quantizable nodes in FP32, INT8 buys little
MIN_EXCLUDED = 4  # (a small model may still keep this many)
# When the CPU's first pick of settings leaves this many times the allowed error (1 -
# target), the search goes straight to keeping nodes in FP32: the other settings moved
# MiniLM's cosine from 0.966 to 0.985 at best (0.99 needs a node in FP32 whatever the
# setting), each a full build (bench/results/quant_minilm.md)
FAR = 2.0
PRUNE_MAX = 12  # nodes in FP32 tried back in INT8, one at a time, once the target is met

# What to try after the default, per instruction set, most promising first. VNNI and AMX
# multiply u8 x s8 without int16 saturation, so full-range and per-channel weights are
# safe there; AVX2's VPMADDUBSW saturates, so signed weights need reduce_range (7 bits),
# or unsigned weights take another (slower) kernel.
CANDIDATES: dict[tuple[str, str], list[dict[str, Any]]] = {
    ("int8-dynamic", "fast"): [
        {"weight_type": "QInt8", "per_channel": True, "reduce_range": False},
        {"weight_type": "QInt8", "per_channel": False, "reduce_range": False},
        {"weight_type": "QInt8", "per_channel": True, "reduce_range": True},
        {"weight_type": "QUInt8", "per_channel": True, "reduce_range": False},
    ],
    ("int8-dynamic", "avx2"): [
        {"weight_type": "QInt8", "per_channel": True, "reduce_range": True},
        {"weight_type": "QUInt8", "per_channel": True, "reduce_range": False},
        {"weight_type": "QUInt8", "per_channel": False, "reduce_range": False},
    ],
    ("int8-static", "fast"): [
        # transformers: the weights' MatMuls only, attention's activation MatMuls in FP32
        {
            "per_channel": True,
            "reduce_range": False,
            "op_types": ["MatMul", "Gemm"],
            "activation_matmuls": False,
            "method": "Percentile",
        },
        {"per_channel": True, "reduce_range": False},
        {"per_channel": True, "reduce_range": False, "method": "Percentile"},
        {"per_channel": True, "reduce_range": True, "method": "Percentile"},
    ],
    ("int8-static", "avx2"): [
        {
            "per_channel": True,
            "reduce_range": True,
            "op_types": ["MatMul", "Gemm"],
            "activation_matmuls": False,
            "method": "Percentile",
        },
        {"per_channel": True, "reduce_range": True, "method": "Percentile"},
        {"per_channel": False, "reduce_range": True},
    ],
}


# Settings raced against whatever meets the target (the same nodes in FP32), per instruction
# set: on VNNI and AMX, signed weights per tensor and per channel take the fastest kernels
# (QInt8 ran 1.96x FP32 against QUInt8's 1.37x on a MiniLM, issue #49); one noisy timing
# used to rank them slow, so they are built and timed side by side before any choice
ALTERNATIVES: dict[tuple[str, str], list[dict[str, Any]]] = {
    ("int8-dynamic", "fast"): [
        {"weight_type": "QInt8", "per_channel": True, "reduce_range": False},
        {"weight_type": "QInt8", "per_channel": False, "reduce_range": False},
    ],
}


KINDS = ("int8-dynamic", "int8-static")  # what "int8" searches: both, the fastest wins


def kind_of(settings: dict[str, Any], precision: str) -> str:
    """The INT8 kind an attempt builds: its settings' "precision" (an "int8" search tries
    both kinds), else the search's own."""
    return str(settings.get("precision", precision))


def _tagged(kind: str, settings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"precision": kind, **s} for s in settings]


def speed_alternatives(
    precision: str, isa: str, op_types: Collection[str] = ()
) -> list[dict[str, Any]]:
    """The settings worth racing once a variant meets the target (none: the ones tried);
    an "int8" search races the other kind's first pick too."""
    family = "fast" if isa in ("amx", "vnni") else "avx2"
    if precision == "int8":
        return [
            *_tagged("int8-dynamic", speed_alternatives("int8-dynamic", isa)),
            {"precision": "int8-static", **starting_settings("int8-static", isa, op_types)},
            {"precision": "int8-dynamic", **starting_settings("int8-dynamic", isa, op_types)},
        ]
    return [dict(s) for s in ALTERNATIVES.get((precision, family), [])]


def candidate_settings(precision: str, isa: str) -> list[dict[str, Any]]:
    """The settings to try on this instruction set ("amx", "vnni", "avx2", ...); for
    "int8", both kinds' (each tagged with its "precision")."""
    if precision == "int8":
        return [s for k in KINDS for s in _tagged(k, candidate_settings(k, isa))]
    family = "fast" if isa in ("amx", "vnni") else "avx2"
    return [dict(s) for s in CANDIDATES.get((precision, family), [])]


def ordered_tries(
    precision: str, isa: str, start: dict[str, Any], op_types: Collection[str]
) -> list[dict[str, Any]]:
    """What to try after `start`, in order: an "int8" search tries the other kind's first
    pick first (the kinds differ more than any setting within one), then the rest."""
    rest = [s for s in candidate_settings(precision, isa) if s != start]
    if precision != "int8":
        return rest
    other = next(k for k in KINDS if k != kind_of(start, precision))
    first = {"precision": other, **starting_settings(other, isa, op_types)}
    return [first, *(s for s in rest if s != first)]


def starting_settings(precision: str, isa: str, op_types: Collection[str]) -> dict[str, Any]:
    """What to build first: the defaults ({}), except dynamic INT8 on VNNI or AMX (this
    CPU's first pick of settings), and static INT8 on a model with MatMuls
    and no convolution (a transformer), which starts from this CPU's MatMul-only setting.
    Quantizing every op there puts Q/DQ pairs around LayerNorm, Softmax and the residual
    Adds: the demo transformer ran 1.12x FP32 that way, 1.36x with its weights' MatMuls
    alone, both at cosine 0.9999; a CNN wants every op quantized (Conv -> Relu -> Conv
    chains stay in INT8: 2.4x). "int8" (either kind) starts from static on a model with
    convolutions (dynamic INT8 skips Conv), from dynamic otherwise."""
    if precision == "int8":
        convs = bool({"Conv", "ConvTranspose"} & set(op_types))
        kind = "int8-static" if convs else "int8-dynamic"
        return {"precision": kind, **starting_settings(kind, isa, op_types)}
    if precision == "int8-dynamic" and isa in ("amx", "vnni"):
        # the defaults are AVX2's (7-bit weights against VPMADDUBSW's saturation, which
        # VNNI does not have): reduce_range only costs accuracy here (MiniLM: 0.807 with
        # the defaults, 0.966 with this CPU's first pick), so start from the pick
        return candidate_settings(precision, isa)[0]
    if precision != "int8-static" or not {"MatMul", "Gemm"} & set(op_types):
        return {}
    if {"Conv", "ConvTranspose"} & set(op_types):
        return {}
    return next((s for s in candidate_settings(precision, isa) if "op_types" in s), {})


@dataclass
class Attempt:
    settings: dict[str, Any]  # over the defaults ({} = the defaults)
    excluded: list[str]  # nodes kept in FP32
    cosine: float  # worst output against FP32
    p50_ms: float
    variant: VariantReady = field(repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "excluded": self.excluded,
            "cosine": self.cosine,
            "p50_ms": self.p50_ms if math.isfinite(self.p50_ms) else None,  # None: not timed
        }


@dataclass
class Outcome:
    chosen: Attempt
    attempts: list[Attempt]
    met: bool
    target: float
    isa: str
    fp32_p50_ms: float
    ranking: dict[str, Any] | None = None  # how the pick was timed against the others

    def details(self) -> dict[str, Any]:
        """What `variant.details` says of it (and the JSON of every run)."""
        return {
            "min_cosine": self.target,
            "met": self.met,
            "isa": self.isa,
            "settings": self.chosen.settings,
            "excluded_nodes": self.chosen.excluded,
            "cosine": self.chosen.cosine,
            "p50_ms": self.chosen.p50_ms,
            "fp32_p50_ms": self.fp32_p50_ms,
            "attempts": [a.to_json() for a in self.attempts],
            "ranking": self.ranking,
        }


def summary(details: dict[str, Any]) -> str:
    """One line: 'INT8 meets 0.99 (0.99412 worst: last_hidden_state: cosine 0.9941 (...);
    int8-static, settings ...; 3 node(s) kept in FP32; 1.41x FP32; 6 attempt(s))'."""
    p50, fp32 = _number(details.get("p50_ms")), _number(details.get("fp32_p50_ms"))
    ratio = fp32 / p50 if p50 > 0 else math.nan
    speed = f", {ratio:.2f}x FP32" if math.isfinite(ratio) else ""
    kept = details.get("excluded_nodes") or []
    kept_text = f"{len(kept)} node(s) kept in FP32" if kept else "no node in FP32"
    verb = "meets" if details.get("met") else "misses"
    ranking = details.get("ranking") or {}
    raced = ""
    if ranking.get("rounds"):
        raced = f", {ranking['rounds']} interleaved round(s) on {ranking.get('clock')} time"
    worst = f" worst: {details['worst']}" if details.get("worst") else ""
    settings = dict(details.get("settings") or {})
    kind = settings.pop("precision", None)
    kind_text = f"{kind}, " if kind else ""
    return (
        f"INT8 {verb} {details.get('min_cosine'):g} ({details.get('cosine', math.nan):.5f}"
        f"{worst}; {kind_text}settings {_describe(settings)}; {kept_text}{speed}{raced}; "
        f"{len(details.get('attempts') or [])} attempt(s))"
    )


Build = Callable[[dict[str, Any], list[str]], Generator[Event, None, VariantReady]]
Score = Callable[[VariantReady], float]  # -> worst output's cosine against FP32
Time = Callable[[str], float]  # a model file -> its p50 (ms)
# (the variant, its settings, nodes already in FP32) -> node units to keep in FP32, worst first
Rank = Callable[
    [VariantReady, dict[str, Any], list[str]],
    Generator[Event, None, list[tuple[list[str], float]]],
]
# attempts that meet the target, most accurate first (a tie goes to the first) -> which
# one is fastest (its index), each one's p50 (ms) and FP32's as timed side by side, and
# how they were ranked (JSON: rounds, spread, contention)
Race = Callable[
    [list[Attempt]], Generator[Event, None, tuple[int, list[float], float, dict[str, Any]]]
]


@dataclass
class Search:
    """What the search is given: how to build a variant, score its accuracy, time a
    model file, rank a variant's nodes, and how many nodes could be quantized."""

    build: Build
    score: Score
    time: Time
    rank: Rank
    quantizable: int
    fp32_path: str
    start: dict[str, Any] = field(default_factory=dict)  # the first build's settings
    far: float = FAR  # misses by this many times the allowed error: straight to the nodes
    # None: each attempt timed once as it is built, the lowest p50 wins (no alternatives)
    race: Race | None = None
    alternatives: list[dict[str, Any]] = field(default_factory=list)  # raced when met
    op_types: Collection[str] = ()  # the model's (an "int8" search's second kind's start)


class _Plan:
    """Attempt n of N (N: the most attempts the search can still make) and the time left,
    from the seconds the attempts so far took (ranking nodes included): every Progress
    of the search says both, and its bar is the share of the planned attempts done."""

    def __init__(self, total: int, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.t0 = clock()
        self.total = total
        self.done = 0  # attempts finished
        self.current = 0  # the attempt under way (0: none yet)

    def start(self) -> None:
        self.current = self.done + 1
        self.total = max(self.total, self.current)

    def finish(self) -> None:
        self.done = self.current

    def plan(self, remaining: int) -> None:
        """At most `remaining` attempts after the ones finished."""
        self.total = max(self.done + remaining, self.current, 1)

    def left_s(self) -> float | None:
        if not self.done:
            return None
        per = (self.clock() - self.t0) / self.done
        return per * max(self.total - self.done, 0)

    def _next(self) -> int:
        """The attempt under way, or (between attempts) the one about to start."""
        return self.current if self.current > self.done else self.done + 1

    def label(self) -> str:
        n = self._next()
        self.total = max(self.total, n)
        left = self.left_s()
        eta = "estimating the time left" if left is None else f"about {left:.0f} s left at most"
        return f"attempt {n} of {self.total}, {eta}"

    def progress(self, ev: Progress) -> Progress:
        share = ev.done / ev.total if ev.total else 0.0
        text = f"{self.label()}: {ev.message}" if ev.message else self.label()
        done = min(self._next() - 1 + min(max(share, 0.0), 1.0), self.total)
        return Progress(ev.stage, done, self.total, text)

    def relay(self, events: Generator[Event, None, Any]) -> Generator[Event, None, Any]:
        """`events` with each Progress said as part of the search."""
        while True:
            try:
                ev = next(events)
            except StopIteration as stop:
                return stop.value
            yield self.progress(ev) if isinstance(ev, Progress) else ev


def meet_target(
    precision: str,
    target: float,
    isa: str,
    how: Search,
    clock: Callable[[], float] = time.perf_counter,
) -> Generator[Event, None, Outcome]:
    """The fastest of what meets `target` first: the first variant (`how.start`, usually
    the defaults), else the candidate settings, else the exclusion rounds' nodes under every
    setting tried; each time with `how.alternatives` beside it (same nodes in FP32), timed
    side by side by `how.race` (without one: the lowest single p50). None meets: the most
    accurate attempt, with a warning. An attempt that misses is not timed."""
    attempts: list[Attempt] = []
    fp32_p50 = math.nan
    tries = ordered_tries(precision, isa, how.start, how.op_types)
    # the most attempts: the first, each candidate, each exclusion round with the halving
    # of its units (log2 of the last round's), and the faster settings retried
    plan = _Plan(1 + 2 * len(tries) + MAX_ROUNDS + MAX_ROUNDS - 1, clock)

    def say(message: str) -> Progress:
        return plan.progress(Progress("variant", 0, 1, message))

    def attempt(
        settings: dict[str, Any], excluded: list[str], timed: bool = True
    ) -> Generator[Event, None, Attempt]:
        plan.start()
        variant = yield from plan.relay(how.build(settings, excluded))
        yield say(f"checking accuracy ({_describe(settings)}, {len(excluded)} in FP32)")
        a = Attempt(settings, list(excluded), how.score(variant), math.nan, variant)
        if how.race is None and (timed or a.cosine >= target):  # (a race times them later)
            a.p50_ms = how.time(variant.path)
        attempts.append(a)
        plan.finish()
        return a

    def outcome(chosen: Attempt, met: bool) -> Outcome:
        return Outcome(chosen, attempts, met, target, isa, fp32_p50)

    def finish(met: list[Attempt]) -> Generator[Event, None, Outcome]:
        """The fastest of `met` and of the alternatives that meet the target with the same
        nodes in FP32: raced side by side (`how.race`), or by their one timing each."""
        nonlocal fp32_p50
        pool = list(met)
        excluded, scope = met[0].excluded, _scope(met[0])
        tried = {_key(a.settings, a.excluded) for a in attempts}
        # the same nodes in FP32 under settings that quantize the same nodes; a setting of
        # another scope (the other INT8 kind) only when nothing is kept in FP32
        alts = [(s, excluded if _scope_of(s) == scope else [])
                for s in how.alternatives if _scope_of(s) == scope or not excluded]  # fmt: skip
        alts = [(s, e) for s, e in alts if _key(s, e) not in tried]
        plan.plan(len(alts))
        for s, e in alts:
            yield say(f"met {target:g}: trying {_describe(s)} too, {len(e)} in FP32")
            try:
                t = yield from attempt(s, e, timed=False)
            except ModelError:
                plan.finish()
                continue
            if t.cosine >= target:
                pool.append(t)
        if how.race is None:
            return outcome(min(pool, key=lambda a: a.p50_ms), True)
        pool.sort(key=lambda a: -a.cosine)  # a tie goes to the most accurate
        yield say(f"timing the {len(pool)} variant(s) that meet {target:g} side by side")
        i, p50s, fp32_p50, ranking = yield from plan.relay(how.race(pool))
        for a, p in zip(pool, p50s, strict=True):
            a.p50_ms = p
        out = outcome(pool[i], True)
        out.ranking = ranking
        return out

    yield say(f"building {_describe(how.start)}")
    plan.start()
    default = yield from plan.relay(how.build(dict(how.start), []))
    yield say("checking accuracy")
    first = Attempt(dict(how.start), [], how.score(default), math.nan, default)
    attempts.append(first)
    plan.finish()
    if first.cosine >= target:
        return (yield from finish([first]))
    if how.race is None:
        yield say("timing FP32 and the first INT8 build for the search")
        fp32_p50 = how.time(how.fp32_path)
        first.p50_ms = how.time(default.path)
    for i, settings in enumerate(tries):
        tried = attempts if how.start else attempts[1:]  # the CPU's first pick is in
        best_error = 1.0 - max(a.cosine for a in attempts)
        kinds = {kind_of(a.settings, precision) for a in attempts}
        new_kind = kind_of(settings, precision) not in kinds  # never skipped for settings
        if tried and not new_kind and best_error >= how.far * (1.0 - target):
            # settings alone move cosine by less than this: straight to the nodes
            yield Notice("info", f"INT8 best cosine {1 - best_error:.4f} misses {target:g} by "
                         f"{best_error / (1 - target):.1f}x the allowed error: keeping "
                         f"sensitive nodes in FP32 instead of trying {len(tries) - i} "
                         "more setting(s)")  # fmt: skip
            break
        yield say(f"cosine {first.cosine:.4f} < {target:g}: trying {_describe(settings)}")
        try:
            yield from attempt(settings, [])
        except ModelError as exc:  # e.g. MatMul-only settings on a model with no MatMul
            plan.finish()
            yield Notice("info", f"INT8 settings {_describe(settings)} do not apply to this "
                         f"model ({exc.message}); trying the next")  # fmt: skip
    meeting = [a for a in attempts if a.cosine >= target]
    if meeting:
        return (yield from finish(meeting))

    def exclude(best: Attempt) -> Generator[Event, None, list[Attempt]]:
        """Keep `best`'s most sensitive nodes in FP32, a few more each round, until it meets
        the target (then the fewest of that round's that do, and the same nodes under the
        other settings of its scope): what meets, or [] when nothing does."""
        # the settings tried before, to retry with the nodes that made `best` meet the
        # target: the most accurate setting is rarely the fastest (MiniLM: QUInt8 1.17x,
        # QInt8 1.58x); only settings that quantize the same nodes (others lose accuracy
        # elsewhere); with a race every one of them, without it those its timing called faster
        others = [
            t for t in attempts
            if not t.excluded and _scope(t) == _scope(best) and t.settings != best.settings
            and (how.race is not None or t.p50_ms < best.p50_ms)
        ]  # fmt: skip
        faster_count = len(others)
        plan.plan(MAX_ROUNDS + MAX_ROUNDS - 1 + faster_count)
        excluded: list[str] = []
        kind = kind_of(best.settings, precision)
        yield say(f"best {kind} {best.cosine:.4f} < {target:g}: ranking nodes to keep in FP32")
        ranking = yield from plan.relay(how.rank(best.variant, best.settings, excluded))
        k = 1
        for round_ in range(MAX_ROUNDS):
            budget = max(MIN_EXCLUDED, int(how.quantizable * MAX_EXCLUDED_SHARE))
            fresh: list[str] = []
            units: list[list[str]] = []  # this round's, in rank order
            for unit, _ in ranking:  # whole units, the worst first, within the budget
                new = [n for n in unit if n not in excluded and n not in fresh]
                if not new or len(units) >= k:
                    continue
                if len(excluded) + len(fresh) + len(new) <= budget:
                    fresh += new
                    units.append(new)
            if not fresh:
                break
            before = list(excluded)
            excluded += fresh
            left = MAX_ROUNDS - round_
            plan.plan(left + max(left - 1, math.ceil(math.log2(max(len(units), 1)))) + faster_count)
            yield say(
                f"round {round_ + 1}: keeping {len(excluded)} sensitive node(s) in FP32 (best "
                f"so far {max(a.cosine for a in attempts):.4f})"
            )
            a = yield from attempt(best.settings, excluded, timed=False)
            if a.cosine >= target:
                # fewer of this round's units may do: halve until the fewest that meet it
                lo, hi = 0, len(units)
                plan.plan(math.ceil(math.log2(max(hi, 1))) + faster_count)
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    fewer = before + [n for u in units[:mid] for n in u]
                    yield say(f"met with {len(excluded)} node(s) in FP32: trying {len(fewer)}")
                    t = yield from attempt(best.settings, fewer, timed=False)
                    if t.cosine >= target:
                        hi, a = mid, t
                    else:
                        lo = mid
                a = yield from prune(best, a)
                excluded = list(a.excluded)
                met = [a]
                plan.plan(len(others))
                for t in others:
                    yield say(f"the same nodes in FP32 with {_describe(t.settings)}")
                    quick = yield from attempt(t.settings, excluded, timed=False)
                    if quick.cosine >= target:
                        met.append(quick)
                return met
            yield say(f"{a.cosine:.4f} < {target:g}: ranking the nodes again")
            ranking = yield from plan.relay(how.rank(a.variant, best.settings, excluded))
            k *= 2
        return []

    def prune(best: Attempt, met: Attempt) -> Generator[Event, None, Attempt]:
        """`met` with each of its FP32 nodes tried back in INT8, the earliest ranked first
        (a round's ranking is made with fewer nodes in FP32; a MiniLM met 0.99 with 8 nodes
        of which the last one did the work): the fewest that still meet the target."""
        kept = list(met.excluded)
        if len(kept) < 2:
            return met
        plan.plan(min(len(kept), PRUNE_MAX))
        for node in kept[:PRUNE_MAX]:
            fewer = [n for n in met.excluded if n != node]
            yield say(f"met with {len(met.excluded)} node(s) in FP32: trying {node} in INT8")
            t = yield from attempt(best.settings, fewer, timed=False)
            if t.cosine >= target:
                met = t
        return met

    # the most accurate attempt of each kind (an "int8" search keeps nodes in FP32 under
    # both: static with a few nodes in FP32 may beat dynamic with many), the best first
    firsts: dict[str, Attempt] = {}
    for a in sorted(attempts, key=lambda a: -a.cosine):
        firsts.setdefault(kind_of(a.settings, precision), a)
    met_all: list[Attempt] = []
    for best in firsts.values():
        try:
            met_all += yield from exclude(best)
        except ModelError as exc:  # a kind whose exclusions cannot build: the other one
            yield Notice("info", f"INT8 {kind_of(best.settings, precision)}: {exc.message}")
    if met_all:
        met_all.sort(key=lambda a: -a.cosine)
        return (yield from finish(met_all))
    chosen = max(attempts, key=lambda a: a.cosine)
    yield Notice(
        "warning",
        f"INT8 cannot reach cosine {target:g} on this model: the best of "
        f"{len(attempts)} attempts reached {chosen.cosine:.5f} ({len(chosen.excluded)} "
        "node(s) in FP32); it runs that one — consider FP16, or a lower --min-cosine",
    )
    return outcome(chosen, False)


def _scope(a: Attempt) -> tuple[Any, Any, Any]:
    """Which nodes a setting quantizes (its op types, whether activation MatMuls too)."""
    return _scope_of(a.settings)


def _scope_of(settings: dict[str, Any]) -> tuple[Any, Any, Any]:
    return (
        settings.get("precision"),
        settings.get("op_types"),
        settings.get("activation_matmuls", True),
    )


def _key(settings: dict[str, Any], excluded: list[str]) -> tuple[str, tuple[str, ...]]:
    return json.dumps(settings, sort_keys=True), tuple(sorted(excluded))


def _number(value: object) -> float:
    """JSON numbers (null: NaN)."""
    return float(value) if isinstance(value, int | float) else math.nan


def _describe(settings: dict[str, Any]) -> str:
    if not settings:
        return "defaults"
    parts = []
    for key, value in settings.items():
        if isinstance(value, bool):
            parts.append(key.replace("_", "-") if value else f"no {key.replace('_', '-')}")
        else:
            parts.append(f"{key.replace('_', ' ')} {value}")
    return ", ".join(parts)
