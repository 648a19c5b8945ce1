"""A quantized generating model against FP32, teacher-forced: FP32 generates greedily from
a fixed set of prompts; both models then read the same sequence (the prompt and FP32's
tokens) in one pass, and each generated position's next-token choice and logits are
compared. Teacher forcing keeps one early difference from counting at every later step.

The prompts are real texts when the folder has a tokenizer (resources/eval_texts.txt, its
evaluation lines, through tokenizer.json): a model's weights err most where random ids
never lead it. Perplexity, FP32's and the variant's, is read on a held text (the file's
calibration lines: texts no prompt uses). Without a tokenizer the prompts are seeded token
ids and there is no perplexity. FP32's side is made once (`reference`) and compared with
every variant a search builds (`compare`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.backends.genai.generate import generate
from engine.backends.genai.model import OpenedLLM
from engine.backends.genai.weight_target import LABELS, Verdict, WeightTarget
from engine.config import RunConfig
from engine.model.realistic_inputs import eval_texts

PROMPT_LENGTHS = (16, 32, 64, 128)  # seeded token prompts, one of each (no tokenizer)
TEXT_PROMPTS = 8  # real texts, each a prompt (with a tokenizer)
MIN_TEXT_TOKENS = 4
MAX_PROMPT_TOKENS = 128
NEW_TOKENS = 16
HELD_TOKENS = 256  # the held text's tokens that perplexity is read on
SEED = 1234
TEXTS = "resources/eval_texts.txt"
METHOD_VERSION = 1  # what a cached choice's figures were measured with (bump on change)


@dataclass(frozen=True)
class Agreement:
    token_agreement: float  # share of positions where both choose the same next token
    cosine_mean: float  # logits, per position
    cosine_min: float
    positions: int
    prompts: int
    data: str = ""  # what the prompts and the held text were
    perplexity_fp32: float | None = None  # on the held text (None: no tokenizer)
    perplexity: float | None = None  # the variant's, on the same text
    held_tokens: int = 0
    verdict: Verdict | None = None  # against the run's target

    def to_json(self) -> dict[str, Any]:
        return {
            "token_agreement": self.token_agreement,
            "logit_cosine": {"mean": self.cosine_mean, "min": self.cosine_min},
            "positions": self.positions,
            "prompts": self.prompts,
            "method": f"teacher-forced over {self.prompts} prompts x {NEW_TOKENS} greedy FP32 "
            "tokens",
            "data": self.data,
            "perplexity": None
            if self.perplexity is None
            else {
                "fp32": self.perplexity_fp32,
                "variant": self.perplexity,
                "tokens": self.held_tokens,
            },
            "target": None if self.verdict is None else self.verdict.target.to_json(),
            "verdict": None if self.verdict is None else self.verdict.to_json(),
        }

    def judged(self, target: WeightTarget, label: str) -> Agreement:
        """The same figures with a verdict against `target` ("INT4" names the variant)."""
        from dataclasses import replace

        v = Verdict(label, self.token_agreement, self.cosine_min, target)
        return replace(self, verdict=v)

    def perplexity_text(self) -> str:
        """'perplexity 9.81 (FP32 9.52) on 256 held tokens', or ''."""
        if self.perplexity is None or self.perplexity_fp32 is None:
            return ""
        return (
            f"perplexity {self.perplexity:.3f} (FP32 {self.perplexity_fp32:.3f}) on "
            f"{self.held_tokens} held tokens"
        )


@dataclass(frozen=True)
class Reference:
    """FP32's side: each prompt with FP32's greedy tokens (what each position read), its
    logits at the generated positions, and its perplexity on the held text."""

    sequences: list[np.ndarray]  # [1, prompt + NEW_TOKENS - 1]
    starts: list[int]  # the first generated position's index (the prompt's last token)
    logits: list[np.ndarray]  # [NEW_TOKENS, vocab] float32
    held: np.ndarray | None  # [1, n] held text ids
    held_nll: float | None  # FP32's mean negative log-likelihood per held token
    data: str


def _text_prompts(llm: OpenedLLM) -> list[np.ndarray]:
    room = min(MAX_PROMPT_TOKENS, llm.context_length - NEW_TOKENS)
    out: list[np.ndarray] = []
    for text in eval_texts("evaluation"):
        ids = [i for i in llm.encode(text) if i < llm.vocab_size][:room]
        if len(ids) >= MIN_TEXT_TOKENS:
            out.append(np.asarray([ids], np.int64))
        if len(out) == TEXT_PROMPTS:
            break
    return out


def _held(llm: OpenedLLM) -> np.ndarray | None:
    ids = [i for i in llm.encode("\n".join(eval_texts("calibration"))) if i < llm.vocab_size]
    ids = ids[: min(HELD_TOKENS, llm.context_length)]
    return np.asarray([ids], np.int64) if len(ids) >= 2 else None


def _seeded_prompts(llm: OpenedLLM) -> list[np.ndarray]:
    rng = np.random.default_rng(SEED)
    usable = [n for n in PROMPT_LENGTHS if n + NEW_TOKENS <= llm.context_length]
    low = llm.first_plain_token
    return [rng.integers(low, llm.vocab_size, size=(1, n), dtype=np.int64) for n in usable]


def _nll(llm: OpenedLLM, ids: np.ndarray) -> float:
    """Mean negative log-likelihood of each next token of `ids`, in one pass."""
    logits = llm.decoder(1, ids.shape[1]).prefill(ids, all_positions=True)[0, :-1]
    z = logits.astype(np.float64)
    z -= z.max(axis=-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    nxt = ids[0, 1:]
    return float(-log_p[np.arange(nxt.size), nxt].mean())


def reference(fp32: OpenedLLM) -> Reference:
    """FP32's generations, logits and held-text perplexity, made once per comparison set."""
    prompts = _text_prompts(fp32) if fp32.can_decode else []
    held = _held(fp32) if fp32.can_decode else None
    if prompts:
        data = (
            f"{len(prompts)} texts of {TEXTS} (evaluation lines) through tokenizer.json, "
            f"{NEW_TOKENS} greedy FP32 tokens each"
        )
    else:
        prompts = _seeded_prompts(fp32)
        why = "no tokenizer.json" if not fp32.can_decode else "no text fits the context"
        data = (
            f"{len(prompts)} seeded random-token prompts ({why}), {NEW_TOKENS} greedy FP32 "
            "tokens each"
        )
    sequences, starts, logits = [], [], []
    for prompt in prompts:
        n = prompt.shape[1]
        made = generate(fp32.decoder(1, n + NEW_TOKENS), prompt, NEW_TOKENS).tokens
        seq = np.concatenate([prompt, made[:, :-1]], axis=1)  # what each position read
        full = fp32.decoder(1, seq.shape[1]).prefill(seq, all_positions=True)
        sequences.append(seq)
        starts.append(n - 1)
        logits.append(np.array(full[0, n - 1 :], np.float32))  # the generated positions
    held_nll = None
    if held is not None:
        held_nll = _nll(fp32, held)
        data += f"; perplexity on {held.shape[1]} tokens of its calibration lines (held)"
    return Reference(sequences, starts, logits, held, held_nll, data)


def compare(ref: Reference, other: OpenedLLM) -> Agreement:
    """`other` against FP32's reference, on the same sequences and held text."""
    same: list[np.ndarray] = []
    cosines: list[np.ndarray] = []
    for seq, start, a32 in zip(ref.sequences, ref.starts, ref.logits, strict=True):
        full = other.decoder(1, seq.shape[1]).prefill(seq, all_positions=True)
        a, b = a32.astype(np.float64), full[0, start:].astype(np.float64)
        same.append(a.argmax(-1) == b.argmax(-1))
        cosines.append((a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)))
    agree = np.concatenate(same)
    cos = np.concatenate(cosines)
    ppl_fp32 = ppl = None
    held_tokens = 0
    if ref.held is not None and ref.held_nll is not None:
        ppl_fp32 = float(np.exp(ref.held_nll))
        ppl = float(np.exp(_nll(other, ref.held)))
        held_tokens = int(ref.held.shape[1])
    return Agreement(
        float(agree.mean()), float(cos.mean()), float(cos.min()), int(agree.size),
        len(ref.sequences), ref.data, ppl_fp32, ppl, held_tokens,
    )  # fmt: skip


def data_id() -> str:
    """What the figures depend on besides the models: the method and the texts."""
    texts = "\n".join(eval_texts("evaluation") + eval_texts("calibration"))
    parts = (METHOD_VERSION, TEXT_PROMPTS, MIN_TEXT_TOKENS, MAX_PROMPT_TOKENS, NEW_TOKENS,
             HELD_TOKENS, SEED, PROMPT_LENGTHS, texts)  # fmt: skip
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


# FP32's reference and the comparisons made in this process: a search's reference and its
# chosen variant's figures serve the run's accuracy after the timing (same models, same data)
_REFERENCES: dict[tuple[str, int, int], Reference] = {}
_COMPARED: dict[tuple[int, str], Agreement] = {}
_KEEP = 8


def _identity(llm: OpenedLLM) -> tuple[str, int, int]:
    f = llm.config.model_file
    st = f.stat()
    return str(f.resolve()), st.st_size, st.st_mtime_ns


def reference_of(fp32: OpenedLLM) -> Reference:
    """`reference(fp32)`, made once per model file in this process."""
    key = _identity(fp32)
    if key not in _REFERENCES:
        _REFERENCES.clear()  # one model at a time (its logits are tens of MB)
        _COMPARED.clear()
        _REFERENCES[key] = reference(fp32)
    return _REFERENCES[key]


def compared(ref: Reference, other: OpenedLLM) -> Agreement:
    """`compare(ref, other)`, once per variant file in this process."""
    key = (id(ref), repr(_identity(other)))
    if key not in _COMPARED:
        if len(_COMPARED) >= _KEEP:
            _COMPARED.pop(next(iter(_COMPARED)))
        _COMPARED[key] = compare(ref, other)
    return _COMPARED[key]


def agreement(fp32: OpenedLLM, other: OpenedLLM, config: RunConfig | None = None) -> Agreement:
    """`other` against `fp32`; with a verdict against `config`'s target when given."""
    found = compared(reference_of(fp32), other)
    if config is None:
        return found
    return found.judged(WeightTarget.of(config), LABELS.get(config.precision, config.precision))
