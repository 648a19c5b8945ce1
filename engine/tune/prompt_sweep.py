"""How a generating model's cost grows with the prompt: TTFT (the prefill) timed at each
prompt length and fitted as a + b*L + c*L^2 (least squares, non-negative terms), so the
share of the quadratic term (attention's scores over the whole prompt) becomes a number;
and TPOT against the context each decode step attends to, fitted as a line: the cost of
one more token of context.

As a job (engine/run/jobs.py: `PromptSweepRequest`), each length's generation run is
recorded in the session as it ends; `opscope generate --sweep-prompt` and the window's
Scaling dock (a generating model's "prompt tokens") both run it."""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from engine import interrupt
from engine.backends.genai.model import genai_folder, read_config
from engine.errors import ConfigError
from engine.events import Event, Notice, Progress
from engine.measure.fits import fit_prefill
from engine.run.generation import GenerateReport, GenerateRequest, run_generate
from engine.session.recording import recorder_at


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

    def fit_text(self) -> str:
        """'TTFT ~ a + b e-3*L + c e-6*L^2 ms': the fit as the CLI and the window say it."""
        a, b, c = self.fit
        return f"TTFT ~ {a:.3f} + {b * 1e3:.3f}e-3*L + {c * 1e6:.4f}e-6*L^2 ms"

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


@dataclass(frozen=True)
class PromptSweepRequest:
    generate: GenerateRequest  # the workload, new tokens and batch of every point
    lengths: tuple[int, ...]  # prompt lengths, three different ones or more
    session: str | None = None  # where each point's generation run is recorded
    job_name: ClassVar[str] = "prompt sweep"


def check_lengths(lengths: list[int] | tuple[int, ...]) -> list[int]:
    """The lengths sorted, or one line saying why they cannot make a fit."""
    if len(set(lengths)) < 3 or min(lengths, default=0) < 1:
        raise ConfigError("--sweep-prompt needs three different lengths or more, each 1 or more")
    return sorted(set(lengths))


def prompt_sweep_job(req: PromptSweepRequest) -> Generator[Event | PromptPoint, None, PromptSweep]:
    """The job: progress, notices and each point as its run ends (that run recorded in
    `req.session`, its raw samples not passed on), then the fitted sweep. Interrupted, the
    point under way is recorded cancelled with the generations it did and the job ends
    with the interruption: the points done stay in the session."""
    lengths = check_lengths(req.lengths)
    said: set[str] = set()  # a note each point's run repeats ("seeded prompt ...") said once
    with recorder_at(req.session, model_path=req.generate.workload.model, kind="generate") as rec:
        gen = sweep_prompt(req.generate, lengths)
        while True:
            try:
                item = next(gen)
            except StopIteration as stop:
                result: PromptSweep = stop.value
                break
            if isinstance(item, PromptPoint):
                yield item
                continue
            if rec is not None:
                rec.feed(item)
            if isinstance(item, Progress) and item.stage == "sweep":
                yield item  # a point's own progress and raw samples stay here
            elif isinstance(item, Notice) and item.message not in said:
                said.add(item.message)
                yield item
    return result


def sweep_prompt(
    base: GenerateRequest, lengths: list[int]
) -> Generator[Event | PromptPoint, None, PromptSweep]:
    """Times `base` at each prompt length (its duration split between them), each point's
    run's events yielded for a recorder before its `PromptPoint`."""
    lengths = check_lengths(lengths)
    model = base.workload.model
    if genai_folder(model) is not None:  # every length fits, before any is timed
        window = read_config(model).context_length
        if lengths[-1] + base.new_tokens > window:
            raise ConfigError(
                f"--sweep-prompt: {lengths[-1]} prompt + {base.new_tokens} new tokens exceed "
                f"the model's context of {window} tokens"
            )
    per = max(base.duration_s / len(lengths), 0.2)
    points: list[PromptPoint] = []
    for i, length in enumerate(lengths):
        yield Progress("sweep", i, len(lengths), f"prompt of {length} tokens")
        req = dataclasses.replace(base, prompt_len=length, prompt_text=None, prompts_file=None,
                                  duration_s=per, profile=False)  # fmt: skip
        report: GenerateReport = yield from run_generate(req)
        if report.interrupted:  # recorded cancelled with what it did: the sweep ends here
            raise KeyboardInterrupt(interrupt.signal_name)
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
