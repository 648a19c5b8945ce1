"""Weight-only quantization that keeps its promise: the cheapest build of a generating
model's weights that meets the accuracy target (weight_target.py), as INT8 does for
encoders. Cheapest is fewest bytes (decode reads every weight once per token, so bytes are
time per token); a tie goes to accuracy level 4 (int8 activations, the faster kernels).

The order, each step a build of its own (cached):
1. the default (blocks of 32, accuracy level 4);
2. it meets: larger blocks (64, 128: fewer scales), while they still meet;
3. it misses: FP32 activations (accuracy level 1), then smaller blocks (16);
4. still short: MatMuls kept at a higher precision (INT8 under INT4, FP32 under INT8) in
   units, most sensitive first by how quantization is known to hurt LLMs: the LM head,
   then whole blocks from both ends of the stack (the first and last blocks), 1, 3, 5 and
   9 units, on the most accurate of the settings tried;
5. none meets: the most accurate attempt, with one line saying so.

The search orders work only; building and scoring are given to it (`evaluate`), so its
order is tested without a model."""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from engine.backends.genai.weight_target import Verdict, WeightTarget
from engine.backends.genai.weights import WeightSettings
from engine.events import Event, Notice, Progress

LARGER_BLOCKS = (64, 128)
SMALLER_BLOCK = 16
PRECISE_LEVEL = 1  # MatMulNBits with fp32 activations
UNIT_ROUNDS = (1, 3, 5, 9)  # units kept at a higher precision, round by round


@dataclass
class WeightAttempt:
    settings: WeightSettings
    token_agreement: float
    cosine_min: float
    bytes: int
    folder: str
    extra: dict[str, Any] = field(default_factory=dict)  # perplexity, build time

    def meets(self, target: WeightTarget) -> bool:
        return self.token_agreement >= target.token_agreement and (
            self.cosine_min >= target.min_cosine
        )

    def line(self) -> str:
        """'INT4 blocks of 32, accuracy level 4: 75.0% token agreement, logit cosine min
        0.3366, 112.4 MB'."""
        return (
            f"{self.settings.describe()}: {self.token_agreement:.1%} token agreement, logit "
            f"cosine min {self.cosine_min:.4f}, {self.bytes / 1e6:.1f} MB"
        )

    def to_json(self) -> dict[str, Any]:
        return {"settings": self.settings.params(), "token_agreement": self.token_agreement,
                "cosine_min": self.cosine_min, "bytes": self.bytes, **self.extra}  # fmt: skip


@dataclass
class WeightChoice:
    chosen: WeightAttempt
    attempts: list[WeightAttempt]
    target: WeightTarget
    label: str  # "INT4"

    @property
    def met(self) -> bool:
        return self.chosen.meets(self.target)

    @property
    def verdict(self) -> Verdict:
        c = self.chosen
        return Verdict(self.label, c.token_agreement, c.cosine_min, self.target)

    def summary(self) -> str:
        """One line: what was chosen and why."""
        n = len(self.attempts)
        if self.met:
            return (f"{self.label} weights: {self.chosen.settings.describe()}, the cheapest of "
                    f"{n} build(s) that meets {self.target.text()}")  # fmt: skip
        return (f"{self.label} weights: none of {n} build(s) meets {self.target.text()}; the "
                f"most accurate runs ({self.chosen.settings.describe()})")  # fmt: skip

    def details(self) -> dict[str, Any]:
        """What `VariantReady.details["weights"]` says (and the JSON of the run)."""
        return {
            "target": self.target.to_json(),
            "met": self.met,
            "line": self.verdict.line(),
            "summary": self.summary(),
            "settings": self.chosen.settings.params(),
            "chosen": self.attempts.index(self.chosen),
            "attempts": [a.to_json() for a in self.attempts],
        }


def units(matmuls: list[str]) -> list[list[str]]:
    """MatMuls grouped for keeping at a higher precision, the likeliest to matter first:
    those outside the numbered blocks (the LM head), then whole blocks from both ends of
    the stack inwards (0, last, 1, last - 1, ...)."""
    blocks: dict[int, list[str]] = {}
    outside: list[str] = []
    for name in matmuls:
        m = re.search(r"layers?[._/](\d+)\b", name)
        if m:
            blocks.setdefault(int(m.group(1)), []).append(name)
        else:
            outside.append(name)
    order = sorted(blocks)
    ends: list[int] = []
    while order:
        ends.append(order.pop(0))
        if order:
            ends.append(order.pop())
    return ([outside] if outside else []) + [blocks[i] for i in ends]


def _cheapest(met: list[WeightAttempt]) -> WeightAttempt:
    return min(met, key=lambda a: (a.bytes, a.settings.accuracy_level != 4,
                                   -a.token_agreement, -a.cosine_min))  # fmt: skip


def _most_accurate(attempts: list[WeightAttempt]) -> WeightAttempt:
    return max(attempts, key=lambda a: (a.token_agreement, a.cosine_min, -a.bytes))


Evaluate = Callable[[WeightSettings], Generator[Event, None, WeightAttempt]]


def search_weights(
    start: WeightSettings,
    target: WeightTarget,
    label: str,
    model_units: list[list[str]],
    evaluate: Evaluate,
    clock: Callable[[], float] = time.perf_counter,
) -> Generator[Event, None, WeightChoice]:
    """The cheapest of the builds tried that meets `target` (see the module's order)."""
    attempts: list[WeightAttempt] = []
    tried: set[str] = set()
    # at most: the default, two more settings, a round per unit count the model has
    rounds = sorted({min(n, len(model_units)) for n in UNIT_ROUNDS if model_units})
    most = 3 + len(rounds)
    t0 = clock()

    def attempt(s: WeightSettings, why: str) -> Generator[Event, None, WeightAttempt | None]:
        key = repr(s.params())
        if key in tried:
            return None
        tried.add(key)
        n = len(attempts)
        left = ""
        if n:
            left = f", about {(clock() - t0) / n * (most - n):.0f} s left at most"
        said = f"{label} build {n + 1} of at most {most}{left}: {s.describe()} ({why})"
        yield Progress("variant", n, most, said)
        a = yield from evaluate(s)
        attempts.append(a)
        verdict = "meets" if a.meets(target) else "misses"
        yield Notice("info", f"{label} build {len(attempts)} {verdict}: {a.line()}")
        return a

    def done(chosen: WeightAttempt) -> WeightChoice:
        return WeightChoice(chosen, attempts, target, label)

    first = yield from attempt(start, "the default")
    assert first is not None
    if first.meets(target):
        for block in (b for b in LARGER_BLOCKS if b > start.block_size):
            a = yield from attempt(dataclasses.replace(start, block_size=block),
                                   "fewer bytes")  # fmt: skip
            if a is None or not a.meets(target):
                break
        return done(_cheapest([a for a in attempts if a.meets(target)]))
    finer = (
        dataclasses.replace(start, accuracy_level=PRECISE_LEVEL),
        dataclasses.replace(start, block_size=min(SMALLER_BLOCK, start.block_size)),
    )
    for s in finer:
        yield from attempt(s, "more accurate")
    met = [a for a in attempts if a.meets(target)]
    if met:
        return done(_cheapest(met))
    base = _most_accurate(attempts).settings
    keep = "int8_nodes" if base.bits < 8 else "fp32_nodes"
    higher = "INT8" if keep == "int8_nodes" else "FP32"
    for n in UNIT_ROUNDS:
        if n > len(model_units):
            n = len(model_units)
        nodes = tuple(name for unit in model_units[:n] for name in unit)
        if not nodes:
            break
        s = (
            dataclasses.replace(base, int8_nodes=nodes)
            if keep == "int8_nodes"
            else dataclasses.replace(base, fp32_nodes=nodes)
        )
        a = yield from attempt(s, f"{n} unit(s) of MatMuls in {higher}")
        if a is not None and a.meets(target):
            return done(_cheapest([a for a in attempts if a.meets(target)]))
        if n == len(model_units):
            break
    best = _most_accurate(attempts)
    yield Notice(
        "warning",
        f"{label} weights cannot meet {target.text()} on this model: the best of "
        f"{len(attempts)} builds reached {best.token_agreement:.1%} token agreement, logit "
        f"cosine min {best.cosine_min:.4f} ({best.settings.describe()}); it runs that one; "
        "consider a higher precision, or a lower --token-agreement / --min-cosine",
    )
    return done(best)
