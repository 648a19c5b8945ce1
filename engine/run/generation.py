"""`opscope generate`: a generating model timed as its users feel it. Whole generations
(prompt, then new tokens) repeat for the duration after a warm-up that is discarded; every
generation gives one time to first token (TTFT: the prefill and the first token's choice)
and one time per output token (TPOT) for each decode step; percentiles come from those raw
samples, with their count."""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from engine import interrupt
from engine.backends.genai.agreement import Agreement, agreement
from engine.backends.genai.generate import Generation, Sampling, generate
from engine.backends.genai.model import OpenedLLM, open_llm
from engine.backends.genai.opening import check_context, open_variant, run_facts
from engine.backends.genai.phases import Phase, profile_phases
from engine.config import RunConfig
from engine.errors import ConfigError
from engine.events import (
    Event,
    GenerationSteps,
    GenerationSummary,
    LatencyBatch,
    Notice,
    Progress,
    RunEnded,
    TimingDone,
)
from engine.measure.contention import Contention, Window
from engine.measure.stats import LatencyStats, Throughput, latency_stats
from engine.model.workload import Workload
from engine.run.prompt_file import read_prompts


@dataclass(frozen=True)
class GenerateRequest:
    local_files: ClassVar[tuple[str, ...]] = ("prompts_file",)  # and the workload's model
    workload: Workload  # the model folder and the config it runs at
    prompt_len: int = 128
    prompt_text: str | None = None
    prompts_file: str | None = None  # JSONL: each timed generation takes the next prompt
    new_tokens: int = 32
    batch: int = 1
    duration_s: float = 10.0
    warmup: int = 2  # whole generations, discarded
    min_generations: int = 3
    sampling: Sampling = field(default_factory=Sampling)
    seed: int = 0
    profile: bool = False  # then prefill and decode profiled apart, after the timing


@dataclass
class GenerateReport:
    model: str
    config: RunConfig
    provider_used: str
    prompt_len: int
    new_tokens: int
    batch: int
    generations: int
    ttft: LatencyStats
    tpot: LatencyStats
    e2e: LatencyStats
    prefill_tokens_per_s: float
    decode_tokens_per_s: float
    kv_bytes_per_token: int  # one sequence's keys and values, every layer
    kv_bytes: int  # the run's cache at its full length, every sequence
    kv_buffer_bytes: int  # what was allocated (the shared buffer at its max length)
    peak_rss_bytes: int
    tokens: list[list[int]]  # the last generation's
    text: list[str] | None = None
    notes: list[str] = field(default_factory=list)
    phases: dict[str, Phase] | None = None
    accuracy: Agreement | None = None  # a quantized model against FP32
    interrupted: bool = False  # a signal ended the timing early: figures of what was done
    contention: Contention | None = None  # how busy the machine was while timing

    def to_json(self) -> dict[str, Any]:
        def pct(s: LatencyStats) -> dict[str, Any]:
            return {"count": s.count, "p50": s.p50, "p90": s.p90, "p99": s.p99, "mean": s.mean,
                    "max": s.max}  # fmt: skip

        return {
            "model": self.model,
            "interrupted": self.interrupted,
            "config": self.config.to_json(),
            "provider_used": self.provider_used,
            "prompt_len": self.prompt_len,
            "new_tokens": self.new_tokens,
            "batch": self.batch,
            "generations": self.generations,
            "ttft_ms": pct(self.ttft),
            "tpot_ms": pct(self.tpot),
            "e2e_ms": pct(self.e2e),
            "tokens_per_s": {
                "prefill": self.prefill_tokens_per_s,
                "decode": self.decode_tokens_per_s,
            },
            "kv_cache": {
                "bytes_per_token": self.kv_bytes_per_token,
                "bytes": self.kv_bytes,
                "buffer_bytes": self.kv_buffer_bytes,
            },
            "peak_rss_bytes": self.peak_rss_bytes,
            "tokens": self.tokens,
            "text": self.text,
            "notes": self.notes,
            "accuracy": None if self.accuracy is None else self.accuracy.to_json(),
            "phases": None
            if self.phases is None
            else {k: p.to_json() for k, p in self.phases.items()},
            "machine": {"contention": self.contention.to_json() if self.contention else None},
        }


def _prompts(req: GenerateRequest, llm: OpenedLLM) -> list[np.ndarray]:
    """The prompts, each [batch, length] (a batch repeats one prompt)."""
    if req.prompts_file is not None:
        room = llm.context_length - req.new_tokens
        rows = read_prompts(req.prompts_file, llm.encode, llm.vocab_size, max(room, 0))
        return [np.tile(r, (req.batch, 1)) for r in rows]
    if req.prompt_text is not None:
        ids = llm.encode(req.prompt_text)
        if not ids:
            raise ConfigError("--prompt: the text has no tokens")
        return [np.tile(np.asarray(ids, np.int64), (req.batch, 1))]
    rng = np.random.default_rng(req.seed)
    low = llm.first_plain_token
    return [rng.integers(low, llm.vocab_size, size=(req.batch, req.prompt_len), dtype=np.int64)]


def run_generate(req: GenerateRequest) -> Generator[Event, None, GenerateReport]:
    """Yields the run's events as a recorder wants them (the model, the run's start, each
    timed generation's passes and its end-to-end latency, the figures, the end), then
    returns the report."""
    if req.new_tokens < 1:
        raise ConfigError("--new-tokens must be at least 1")
    llm, original, folder = yield from open_variant(req.workload.model, req.workload.config)
    precision = req.workload.config.precision
    prompts = _prompts(req, llm)
    lengths = [int(p.shape[1]) for p in prompts]
    prompt = prompts[0]
    check_context(llm, max(lengths), req.new_tokens)
    length = max(lengths) + req.new_tokens
    mean_len = round(float(np.mean(lengths)))
    if len(prompts) > 1:
        said = f"{min(lengths)} to {max(lengths)} tokens (mean {mean_len})"
        yield Notice("info", f"{len(prompts)} prompts from {req.prompts_file}: {said}, one "
                     "per generation in turn")  # fmt: skip
    decoder = llm.decoder(req.batch, length)
    for note in llm.notes:
        yield Notice("info", note)
    config = req.workload.config.resolved()
    yield from run_facts(llm, config, req.batch, mean_len, req.new_tokens, req.sampling.describe())

    turn = 0

    def once() -> Generation:
        nonlocal turn
        turn += 1
        return generate(decoder, prompts[(turn - 1) % len(prompts)], req.new_tokens, req.sampling)

    for i in range(req.warmup):
        yield Progress("warmup", i, req.warmup, f"warm-up generation {i + 1}/{req.warmup}")
        once()
    turn = 0  # the timed generations start from the first prompt
    done: list[Generation] = []
    load = Window()  # how busy the machine was over the timed generations
    origin = time.perf_counter_ns()
    end = time.perf_counter() + req.duration_s
    # a signal (Ctrl+C, SIGTERM) ends the timing after the generation under way: the
    # summary of those done, then the run recorded cancelled (nothing done: as before)
    with interrupt.deferred():
        while time.perf_counter() < end or len(done) < req.min_generations:
            if interrupt.received.is_set():
                break
            start = time.perf_counter_ns() - origin
            g = once()
            done.append(g)
            steps = np.asarray([g.ttft_s, *g.step_s]) * 1e9
            yield GenerationSteps(len(done) - 1, start, steps.astype(np.int64), origin)
            yield LatencyBatch(
                np.asarray([start], np.int64), np.asarray([int(g.total_s * 1e9)], np.int64),
                origin,
            )  # fmt: skip
            yield Progress(
                "generate", len(done), None,
                f"{len(done)} generation(s): TTFT {g.ttft_s * 1e3:.1f} ms",
            )  # fmt: skip
    interrupted = interrupt.received.is_set()
    if interrupted and not done:
        raise KeyboardInterrupt(interrupt.signal_name)
    elapsed = (time.perf_counter_ns() - origin) / 1e9
    ttft = np.asarray([g.ttft_s for g in done]) * 1e9
    tpot = np.asarray([s for g in done for s in g.step_s]) * 1e9
    e2e = np.asarray([g.total_s for g in done]) * 1e9
    ttft_s, tpot_s, e2e_s = latency_stats(ttft), latency_stats(tpot), latency_stats(e2e)
    contention = load.done()
    yield TimingDone(
        e2e_s,
        Throughput(len(done) / elapsed, len(done) * req.batch / elapsed),
        True,
        req.warmup,
        elapsed,
        contention,
    )
    per_token = llm.kv_bytes_per_token
    last = done[-1].tokens
    accuracy = None
    if precision != "fp32" and not interrupted:  # after the timing, never inside it
        yield Progress("accuracy", 0, None, f"{precision} against FP32, token by token")
        asked = req.workload.config
        accuracy = agreement(open_llm(original.folder, asked), llm, asked)
    phases = None
    if req.profile and not interrupted:  # its own session: the timing never ran with it
        for item in profile_phases(str(folder), req.workload.config, prompt, req.new_tokens):
            if isinstance(item, dict):
                phases = item
            else:
                yield item
    report = GenerateReport(
        model=req.workload.model,
        config=config,
        provider_used=llm.provider_used,
        prompt_len=mean_len,
        new_tokens=req.new_tokens,
        batch=req.batch,
        generations=len(done),
        ttft=ttft_s,
        tpot=tpot_s,
        e2e=e2e_s,
        prefill_tokens_per_s=req.batch * mean_len / (ttft_s.p50 / 1e3),
        decode_tokens_per_s=req.batch / (tpot_s.p50 / 1e3) if tpot_s.count else float("nan"),
        kv_bytes_per_token=per_token,
        kv_bytes=per_token * (mean_len + req.new_tokens) * req.batch,
        kv_buffer_bytes=sum(a.nbytes for a in decoder.cache),
        peak_rss_bytes=_peak_rss(),
        tokens=last.tolist(),
        text=[llm.decode(row) for row in last.tolist()] if llm.can_decode else None,
        phases=phases,
        accuracy=accuracy,
        interrupted=interrupted,
        contention=contention,
    )
    figures = report.to_json()
    figures.pop("tokens")
    figures.pop("text")
    yield GenerationSummary(figures)
    yield RunEnded("cancelled", interrupt.reason()) if interrupted else RunEnded("ok")
    return report


def _peak_rss() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # Linux: KiB
