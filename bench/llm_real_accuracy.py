"""OpScope's weight precisions of one real LLM against transformers' FP32 logits, on real
text (resources/eval_texts.txt). For each text, transformers generates greedily (FP32, at
most NEW tokens, stopping at the end-of-text token as its users see it); each precision
then reads the text and that continuation in one pass (teacher-forced: one early
difference does not count again at every later position) and its logits at every position
are compared with transformers' at the same position: next-token agreement (the same
argmax) and logit cosine, over the text's own positions and over the generated ones. Then
OpScope's own loop (`generate`, greedy) continues each text, and its tokens are compared
with transformers' greedy tokens one by one (N of N identical)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

NEW = 16  # greedy tokens per text
TEXTS = 8  # texts used: the first ones of at least MIN_TOKENS tokens
MIN_TOKENS = 10
PRECISIONS = ("fp32", "fp16", "int8-weights", "int4-weights")
SAMPLE = "The capital of France is"  # the example: its continuation per precision
SAMPLE_NEW = 12


@dataclass
class Reference:
    """transformers' FP32: each text's ids, its greedy continuation and the logits of every
    position of text + continuation (the last token is not read)."""

    prompts: list[list[int]]
    made: list[list[int]]
    logits: list[np.ndarray]
    sample: list[int]
    sample_made: list[int]


def texts(path: Path, tokenize: Any) -> list[list[int]]:
    out = []
    for line in path.read_text().splitlines():
        ids = tokenize(line.strip())
        if len(ids) >= MIN_TOKENS:
            out.append(ids)
        if len(out) == TEXTS:
            break
    return out


def reference(hf: Path, eval_texts: Path, threads: int) -> tuple[Reference, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(threads)
    tok = AutoTokenizer.from_pretrained(str(hf))
    model = AutoModelForCausalLM.from_pretrained(str(hf), dtype=torch.float32).eval()
    gc = model.generation_config
    gc.do_sample, gc.temperature, gc.top_p, gc.top_k = False, None, None, None

    def greedy(ids: list[int], n: int) -> list[int]:
        t = torch.tensor([ids])
        with torch.inference_mode():
            out = model.generate(
                input_ids=t,
                attention_mask=torch.ones_like(t),
                max_new_tokens=n,
                do_sample=False,
                pad_token_id=gc.pad_token_id or gc.eos_token_id,
            )
        return [int(x) for x in out[0, len(ids) :]]

    prompts = texts(eval_texts, lambda s: list(tok(s)["input_ids"]))
    made, logits = [], []
    for ids in prompts:
        cont = greedy(ids, NEW)
        seq = torch.tensor([ids + cont[:-1]])
        with torch.inference_mode():
            logits.append(model(input_ids=seq).logits[0].double().numpy())
        made.append(cont)
    sample = list(tok(SAMPLE)["input_ids"])
    return Reference(prompts, made, logits, sample, greedy(sample, SAMPLE_NEW)), tok


def compare(ref: Reference, genai_folder: Path, precision: str, threads: int) -> dict[str, Any]:
    """One precision of OpScope (its weight variant, built or cached by llm_variant) against
    transformers' FP32."""
    from engine.backends.genai.generate import generate
    from engine.backends.genai.model import open_llm, read_config
    from engine.backends.genai.weights import llm_variant
    from engine.config import RunConfig

    t0 = time.perf_counter()
    folder, built = llm_variant(read_config(genai_folder), precision)
    build_s = time.perf_counter() - t0
    llm = open_llm(folder, RunConfig(threads=threads))
    agree: dict[str, list[np.ndarray]] = {"text": [], "generated": []}
    cos: dict[str, list[np.ndarray]] = {"text": [], "generated": []}
    same = total = 0
    first_diff: list[int] = []
    for ids, made, want in zip(ref.prompts, ref.made, ref.logits, strict=True):
        seq = np.asarray([ids + made[:-1]], np.int64)
        got = llm.decoder(1, seq.shape[1]).prefill(seq, all_positions=True)[0].astype(np.float64)
        n = len(ids)
        c = (got * want).sum(-1) / (np.linalg.norm(got, axis=-1) * np.linalg.norm(want, axis=-1))
        hit = got.argmax(-1) == want.argmax(-1)
        for part, sl in (("text", slice(0, n - 1)), ("generated", slice(n - 1, None))):
            agree[part].append(hit[sl])
            cos[part].append(c[sl])
        ours = generate(llm.decoder(1, n + len(made)), np.asarray([ids], np.int64), len(made))
        mine = [int(t) for t in ours.tokens[0]]
        match = [a == b for a, b in zip(mine, made, strict=True)]
        same += sum(match)
        total += len(made)
        first_diff.append(match.index(False) if False in match else -1)
    sample = generate(
        llm.decoder(1, len(ref.sample) + SAMPLE_NEW), np.asarray([ref.sample], np.int64), SAMPLE_NEW
    )
    out: dict[str, Any] = {
        "precision": precision,
        "build_s": build_s,
        "cached": bool(built.get("cached")),
        "greedy_same": same,
        "greedy_total": total,
        "texts_identical": sum(1 for d in first_diff if d < 0),
        "texts": len(first_diff),
        "sample_tokens": [int(t) for t in sample.tokens[0]],
    }
    for part in ("text", "generated"):
        a, c = np.concatenate(agree[part]), np.concatenate(cos[part])
        out[part] = {
            "agreement": float(a.mean()),
            "cos_mean": float(c.mean()),
            "cos_min": float(c.min()),
            "positions": int(a.size),
        }
    return out


def accuracy(hf: Path, genai_folder: Path, eval_texts: Path, threads: int) -> dict[str, Any]:
    ref, tok = reference(hf, eval_texts, threads)
    rows = [compare(ref, genai_folder, p, threads) for p in PRECISIONS]
    for row in rows:
        row["sample_text"] = tok.decode(row.pop("sample_tokens"))
    return {
        "rows": rows,
        "texts": len(ref.prompts),
        "new": NEW,
        "prompt_tokens": [len(p) for p in ref.prompts],
        "transformers_sample": tok.decode(ref.sample_made),
        "sample": SAMPLE,
    }
