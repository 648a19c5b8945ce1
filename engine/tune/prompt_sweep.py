"""How a generating model's cost grows with the prompt: TTFT (the prefill) timed at each
prompt length and fitted as a + b*L + c*L^2 (least squares, non-negative terms), so the
share of the quadratic term (attention's scores over the whole prompt) becomes a number;
and TPOT against the context each decode step attends to, fitted as a line: the cost of
one more token of context."""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.events import Event, Progress, drive
from engine.measure.fits import fit_prefill
from engine.run.generation import GenerateReport, GenerateRequest, run_generate


@dataclass(frozen=True)
class PromptPoint:
    prompt_len: int
    ttft_p50_ms: float
    tpot_p50_ms: float
    generations: int

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class PromptSweep:
    points: list[PromptPoint]
    fit: tuple[float, float, float]  # a (ms), b (ms per token), c (ms per token^2)
    quadratic_share: float  # c*L^2 / TTFT at the longest prompt
    tpot_per_context_token_us: float  # slope of TPOT against the context length
    tpot_base_ms: float

    def to_json(self) -> dict[str, Any]:
        a, b, c = self.fit
        return {
            "points": [p.to_json() for p in self.points],
            "prefill_fit": {
                "a_ms": a,
                "b_ms_per_token": b,
                "c_ms_per_token2": c,
                "quadratic_share_at_longest": self.quadratic_share,
            },
            "tpot_fit": {
                "base_ms": self.tpot_base_ms,
                "us_per_context_token": self.tpot_per_context_token_us,
            },
        }


def sweep_prompt(
    base: GenerateRequest, lengths: list[int]
) -> Generator[Event | PromptPoint, None, PromptSweep]:
    """Times `base` at each prompt length (its duration split between them)."""
    if len(lengths) < 3:
        raise ValueError("--sweep-prompt needs three lengths or more (a quadratic has three terms)")
    per = max(base.duration_s / len(lengths), 0.2)
    points: list[PromptPoint] = []
    for i, length in enumerate(sorted(set(lengths))):
        yield Progress("sweep", i, len(lengths), f"prompt of {length} tokens")
        req = dataclasses.replace(base, prompt_len=length, prompt_text=None, duration_s=per,
                                  profile=False)  # fmt: skip
        report: GenerateReport = drive(run_generate(req), lambda _: None)  # notes said once
        point = PromptPoint(length, report.ttft.p50, report.tpot.p50, report.generations)
        points.append(point)
        yield point
    lens = np.asarray([p.prompt_len for p in points], np.float64)
    a, b, c = fit_prefill(lens, np.asarray([p.ttft_p50_ms for p in points]))
    longest = lens[-1]
    total = a + b * longest + c * longest**2
    # a decode step attends to the prompt and the tokens made so far: half the new ones
    context = lens + base.new_tokens / 2
    tpot = np.asarray([p.tpot_p50_ms for p in points])
    slope, base_ms = np.polyfit(context, tpot, 1) if np.all(np.isfinite(tpot)) else (np.nan, np.nan)
    return PromptSweep(
        points, (a, b, c), c * longest**2 / total if total > 0 else float("nan"),
        float(slope) * 1e3, float(base_ms),
    )  # fmt: skip
