"""A generating model as a backend: one timed run is one whole generation (the prompt's
prefill, then `new_tokens` decode steps), so `bench`, the live app and sessions time it like
any model; each generation's passes come out as GenerationSteps events (`drain_events`),
for TTFT and TPOT. The prompt is `shapes["input_ids"]` ([batch, length]; default
[batch, 128]) of seeded tokens."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Generator, Iterator
from typing import Any

import numpy as np

from engine.backends.genai.agreement import agreement
from engine.backends.genai.generate import Generation, generate
from engine.backends.genai.model import OpenedLLM, open_llm
from engine.backends.genai.opening import check_context, open_variant, run_facts
from engine.config import RunConfig
from engine.errors import ConfigError
from engine.events import (
    AccuracyResult,
    Event,
    GenerationSteps,
    Notice,
    Progress,
)
from engine.model.inputs import Feeds

DEFAULT_PROMPT = 128
DEFAULT_NEW_TOKENS = 32


@dataclasses.dataclass
class GenPrepared:
    config: RunConfig
    feeds: Feeds
    llm: OpenedLLM
    original: str  # the FP32 folder
    folder: str  # the folder run (a weight-only variant's, or the original)
    new_tokens: int
    _steps: list[tuple[int, Generation]] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        prompt = self.feeds["input_ids"]
        self.decoder = self.llm.decoder(prompt.shape[0], prompt.shape[1] + self.new_tokens)

    @property
    def batch(self) -> int:
        return int(self.feeds["input_ids"].shape[0])

    @property
    def provider_used(self) -> str:
        return self.llm.provider_used

    def make_feeds(self, index: int) -> Feeds:
        return self.feeds

    def run_once(self) -> object:
        """One whole generation; its passes kept for `drain_events`."""
        start = time.perf_counter_ns()
        made = generate(self.decoder, self.feeds["input_ids"], self.new_tokens)
        self._steps.append((start, made))
        return made.tokens

    def drain_events(self, origin_ns: int) -> list[Event]:
        """The generations run since the last call, as GenerationSteps (times from
        `origin_ns`, the timing's origin)."""
        steps, self._steps = self._steps, []
        return [  # warm-up generations (started before the origin) are not kept
            GenerationSteps(
                -1,
                start - origin_ns,
                (np.asarray([g.ttft_s, *g.step_s]) * 1e9).astype(np.int64),
                origin_ns,
            )
            for start, g in steps
            if start >= origin_ns
        ]

    def run_batch(self, feeds: Feeds) -> list[np.ndarray]:
        raise ConfigError(
            "a generating model is served token by token: `opscope simulate MODEL --llm`"
        )

    def accuracy(self, generated: bool) -> Iterator[Event]:
        """Weight-only variants against FP32, teacher-forced (token agreement, logits)."""
        if self.config.precision == "fp32":
            return
        yield Progress("accuracy", 0, None, "comparing with the FP32 model, token by token")
        fp32 = open_llm(self.original, dataclasses.replace(self.config, precision="fp32"))
        a = agreement(fp32, self.llm, self.config)
        assert a.verdict is not None
        yield AccuracyResult(
            baseline="fp32",
            max_abs_err=float("nan"),
            mean_abs_err=float("nan"),
            cosine=a.cosine_min,
            top1_agreement=a.token_agreement,
            samples=a.positions,
            per_output={"logits": {"cosine": a.cosine_mean, "top1_agreement": a.token_agreement}},
            mean_cosine=a.cosine_mean,
            checks=a.verdict.checks(a.positions, a.cosine_mean, a.perplexity_text()),
            data=a.data,
        )

    def profile(self, runs: int, timed_mean_ms: float | None) -> Iterator[Event]:
        """Prefill and decode profiled apart: an OpProfile for each phase."""
        from engine.backends.genai.phases import profile_phases

        generations = max(1, min(3, runs // max(1, self.new_tokens)))
        for item in profile_phases(self.folder, self.config, self.feeds["input_ids"],
                                   self.new_tokens, generations):  # fmt: skip
            if isinstance(item, dict):
                for phase in item.values():
                    yield phase.profile
            else:
                yield item

    def close(self) -> None:
        self._steps.clear()


def prepare(req: Any) -> Generator[Event, None, GenPrepared]:
    config = req.workload.config.resolved()
    llm, original, folder = yield from open_variant(req.workload.model, config)
    for note in llm.notes:
        yield Notice("info", note)
    asked = req.workload.inputs.shapes.get(llm.shape.input_ids, (config.batch, DEFAULT_PROMPT))
    if len(asked) != 2 or min(asked) < 1:
        raise ConfigError(f"--shape {llm.shape.input_ids}: BATCHxLENGTH, got {asked}")
    shape = (config.batch, int(asked[1]))  # the batch knob decides the sequences at once
    new_tokens = req.new_tokens or DEFAULT_NEW_TOKENS
    check_context(llm, shape[1], new_tokens)
    rng = np.random.default_rng(req.seed)
    prompt = rng.integers(llm.first_plain_token, llm.vocab_size, size=shape, dtype=np.int64)
    feeds = {"input_ids": prompt}
    yield from run_facts(llm, config, shape[0], shape[1], new_tokens, "greedy")
    prepared = GenPrepared(config, feeds, llm, str(original.folder), str(folder), new_tokens)
    prepared.run_once()  # one inference checked, as every backend does
    prepared._steps.clear()
    return prepared
