"""A quantized generating model against FP32, teacher-forced: FP32 generates greedily from
a fixed set of prompts; both models then read the same sequence (the prompt and FP32's
tokens) in one pass, and each generated position's next-token choice and logits are
compared. Teacher forcing keeps one early difference from counting at every later step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.backends.genai.generate import generate
from engine.backends.genai.model import OpenedLLM

PROMPT_LENGTHS = (16, 32, 64, 128)  # seeded token prompts, one of each
NEW_TOKENS = 16
SEED = 1234


@dataclass(frozen=True)
class Agreement:
    token_agreement: float  # share of positions where both choose the same next token
    cosine_mean: float  # logits, per position
    cosine_min: float
    positions: int
    prompts: int

    def to_json(self) -> dict[str, Any]:
        return {
            "token_agreement": self.token_agreement,
            "logit_cosine": {"mean": self.cosine_mean, "min": self.cosine_min},
            "positions": self.positions,
            "prompts": self.prompts,
            "method": f"teacher-forced over {self.prompts} seeded prompts x {NEW_TOKENS} "
            "greedy FP32 tokens",
        }


def _prompts(llm: OpenedLLM) -> list[np.ndarray]:
    rng = np.random.default_rng(SEED)
    usable = [n for n in PROMPT_LENGTHS if n + NEW_TOKENS <= llm.context_length]
    low = llm.first_plain_token
    return [rng.integers(low, llm.vocab_size, size=(1, n), dtype=np.int64) for n in usable]


def agreement(fp32: OpenedLLM, other: OpenedLLM) -> Agreement:
    same: list[np.ndarray] = []
    cosines: list[np.ndarray] = []
    prompts = _prompts(fp32)
    for prompt in prompts:
        n = prompt.shape[1]
        made = generate(fp32.decoder(1, n + NEW_TOKENS), prompt, NEW_TOKENS).tokens
        seq = np.concatenate([prompt, made[:, :-1]], axis=1)  # what each position read
        logits = []
        for llm in (fp32, other):
            full = llm.decoder(1, seq.shape[1]).prefill(seq, all_positions=True)
            logits.append(full[0, n - 1 :].astype(np.float64))  # the generated positions
        a, b = logits
        same.append(a.argmax(-1) == b.argmax(-1))
        cosines.append((a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)))
    agree = np.concatenate(same)
    cos = np.concatenate(cosines)
    return Agreement(float(agree.mean()), float(cos.mean()), float(cos.min()), int(agree.size),
                     len(prompts))  # fmt: skip
