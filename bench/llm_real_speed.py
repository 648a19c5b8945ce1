"""Tokens/s of one real LLM on three engines, interleaved: OpScope's own generation loop
(engine/backends/genai: `open_llm`, its decoder with the KV cache in one shared buffer, and
`generate`, the loop `opscope generate` times), a bare onnxruntime-genai loop on the same
folder (og.Model, og.Generator, `generate_next_token`) and transformers on PyTorch
(`model.generate`, greedy). The same prompt tokens, the same number of new tokens (none
stops early at the end-of-text token), fp32, the same intra-op thread count everywhere.

Each generation is timed from the prompt's token ids in hand to the last new token in hand
(genai's Generator is made inside that time: it is made per generation; OpScope's decoder
is made once, as `opscope generate` makes it); its first token's time is the TTFT. A round
runs each engine once, the order turning each round (A B C, B C A, C A B, ...)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

Runner = Callable[[], "Timed"]
ENGINES = ("opscope", "genai", "transformers")


@dataclass(frozen=True)
class Timed:
    tokens: tuple[int, ...]
    ttft_s: float
    total_s: float


def opscope_runner(
    folder: Path, prompt: list[int], new: int, threads: int, spinning: bool = False
) -> Runner:
    from engine.backends.genai.generate import generate
    from engine.backends.genai.model import open_llm
    from engine.config import RunConfig

    llm = open_llm(folder, RunConfig(threads=threads, spinning=spinning))
    decoder = llm.decoder(1, len(prompt) + new)
    ids = np.asarray([prompt], np.int64)

    def run() -> Timed:
        t0 = time.perf_counter()
        g = generate(decoder, ids, new)
        total = time.perf_counter() - t0
        return Timed(tuple(int(t) for t in g.tokens[0]), g.ttft_s, total)

    return run


def genai_runner(folder: Path, prompt: list[int], new: int, threads: int) -> Runner:
    """The loop onnxruntime-genai's own examples write; its session given `threads`
    intra-op threads through genai_config's session_options (an overlay, file untouched)."""
    import onnxruntime_genai as og

    config = og.Config(str(folder))
    options = {"intra_op_num_threads": threads, "inter_op_num_threads": 1}
    config.overlay(json.dumps({"model": {"decoder": {"session_options": options}}}))
    model = og.Model(config)
    ids = np.asarray([prompt], np.int64)
    length = len(prompt) + new
    # a sliding-window model's cache (genai sizes it by max_length) must hold its window
    cfg = json.loads((folder / "genai_config.json").read_text())["model"]["decoder"]
    cache = max(length, int(cfg.get("sliding_window", {}).get("window_size", 0)))

    def run() -> Timed:
        t0 = time.perf_counter()
        params = og.GeneratorParams(model)
        # min_length: the end-of-text token never stops it before `new` tokens
        params.set_search_options(max_length=cache, min_length=length, do_sample=False)
        gen = og.Generator(model, params)
        gen.append_tokens(ids)  # the prefill
        gen.generate_next_token()
        out = [int(gen.get_next_tokens()[0])]
        ttft = time.perf_counter() - t0
        while len(out) < new:
            gen.generate_next_token()
            out.append(int(gen.get_next_tokens()[0]))
        total = time.perf_counter() - t0
        return Timed(tuple(out), ttft, total)

    return run


def transformers_runner(
    hf: Path, prompt: list[int], new: int, threads: int, max_time: float | None = None
) -> Runner:
    """`model.generate`, greedy; with `max_time`, a generation stops after that many seconds
    (transformers' own max_time; under load its generations can take minutes) and its
    rates count the tokens it made."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.generation.streamers import BaseStreamer

    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(str(hf), dtype=torch.float32).eval()
    gc = model.generation_config
    gc.do_sample, gc.temperature, gc.top_p, gc.top_k = False, None, None, None
    ids = torch.tensor([prompt], dtype=torch.long)

    class Stamps(BaseStreamer):  # type: ignore[misc]
        """When each token came out: the prompt first, then one call per new token."""

        def __init__(self) -> None:
            self.times: list[float] = []

        def put(self, value: Any) -> None:
            self.times.append(time.perf_counter())

        def end(self) -> None:
            pass

    def run() -> Timed:
        stamps = Stamps()
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=new,
                min_new_tokens=new,
                do_sample=False,
                streamer=stamps,
                max_time=max_time,
                pad_token_id=gc.pad_token_id if gc.pad_token_id is not None else gc.eos_token_id,
            )
        total = time.perf_counter() - t0
        made = tuple(int(t) for t in out[0, len(prompt) :])
        return Timed(made, stamps.times[1] - t0, total)

    return run


def rounds(
    runners: dict[str, Runner], n: int, warmup: int = 1, caps: dict[str, int] | None = None
) -> dict[str, list[Timed]]:
    """`warmup` discarded generations of each engine, then `n` rounds, the order turning;
    an engine in `caps` runs only in the first rounds, that many (one far slower under
    load than the others would otherwise take the whole run)."""
    names = list(runners)
    for _ in range(warmup):
        for name in names:
            runners[name]()
    out: dict[str, list[Timed]] = {name: [] for name in names}
    for r in range(n):
        for k in range(len(names)):
            name = names[(r + k) % len(names)]
            if len(out[name]) < (caps or {}).get(name, n):
                out[name].append(runners[name]())
    return out


def summarize(timed: dict[str, list[Timed]], new: int) -> dict[str, Any]:
    """Per engine: tokens/s end to end (tokens made / generation time), decode tokens/s
    (the tokens after the first / their time), TTFT ms: median [min-max] and IQR over the
    rounds; OpScope against genai as the ratio of their tokens/s in each round."""
    out: dict[str, Any] = {"engines": {}}
    for name, runs in timed.items():
        e2e = np.asarray([len(t.tokens) / t.total_s for t in runs])
        dec = np.asarray([(len(t.tokens) - 1) / (t.total_s - t.ttft_s) for t in runs])
        ttft = np.asarray([t.ttft_s * 1e3 for t in runs])
        out["engines"][name] = {
            "e2e": spread(e2e),
            "decode": spread(dec),
            "ttft_ms": spread(ttft),
            "tokens": list(runs[0].tokens),
            "same_tokens_every_round": len({t.tokens for t in runs}) == 1,
            "tokens_made": [len(t.tokens) for t in runs],
        }
    if "opscope" in timed and "genai" in timed:
        for ours in (n for n in timed if n.startswith("opscope")):
            pairs = list(zip(timed[ours], timed["genai"], strict=True))
            # OpScope's tokens/s over genai's in the same round
            e2e = np.asarray([g.total_s / o.total_s for o, g in pairs])
            dec = np.asarray([(g.total_s - g.ttft_s) / (o.total_s - o.ttft_s) for o, g in pairs])
            out.setdefault("ratios", {})[ours] = {"e2e": spread(e2e), "decode": spread(dec)}
    return out


def spread(values: np.ndarray) -> dict[str, float]:
    q1, med, q3 = np.percentile(values, [25, 50, 75])
    return {
        "median": float(med),
        "min": float(values.min()),
        "max": float(values.max()),
        "q1": float(q1),
        "q3": float(q3),
        "n": int(values.size),
    }


def step_split(folder: Path, threads: int, prompt: list[int], steps: int = 40) -> dict[str, float]:
    """Where a decode step of OpScope's decoder goes: the median step (the run, the token's
    choice, the bindings and copies around it) against the median ONNX Runtime run inside it
    (its session's `run_with_iobinding` timed alone): what is left is the Python loop's own
    cost per token."""
    from engine.backends.genai.model import open_llm
    from engine.config import RunConfig

    llm = open_llm(folder, RunConfig(threads=threads))
    decoder = llm.decoder(1, len(prompt) + steps + 1)
    session = decoder.session
    inner = session.run_with_iobinding
    runs: list[float] = []

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = inner(*args, **kwargs)
        runs.append(time.perf_counter() - t0)
        return out

    token = decoder.prefill(np.asarray([prompt], np.int64)).argmax(-1)
    session.run_with_iobinding = timed
    took = []
    try:
        for _ in range(steps):
            t0 = time.perf_counter()
            token = decoder.step(np.asarray(token, np.int64)).argmax(-1)
            took.append(time.perf_counter() - t0)
    finally:
        del session.run_with_iobinding
    step, run = float(np.median(took)) * 1e3, float(np.median(runs[-steps:])) * 1e3
    return {"step_ms": step, "run_ms": run, "outside_ms": step - run, "steps": steps}
