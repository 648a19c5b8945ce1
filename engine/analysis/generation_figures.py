"""One processor from a recorded generation run (kind `generate`) to the figures the report
shows: TTFT and TPOT percentiles with their counts from the raw passes, the prefill/decode
split of a generation, tokens/s, the KV cache's size, and, read defensively from the stored
summary (untrusted JSON), the profiled phases and the accuracy against FP32."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.analysis.json_fields import mapping, number, whole
from engine.measure.stats import LatencyStats, latency_stats
from engine.session.generation_rows import GenerationRun

TOP_OP_TYPES = 3
PHASES = ("prefill", "decode")


@dataclass(frozen=True)
class PhaseFigures:
    """One profiled phase, per pass (`opscope generate --profile`)."""

    name: str
    passes: int | None
    time_ms: float
    gflop: float
    mbytes: float
    intensity: float  # FLOP/byte
    gflops_per_s: float
    top_op_types: list[tuple[str, float]]  # (op type, share of the phase's time)


@dataclass(frozen=True)
class AccuracyFigures:
    token_agreement: float
    cosine_mean: float
    cosine_min: float
    positions: int | None
    method: str


@dataclass(frozen=True)
class GenerationFigures:
    run_id: int
    ttft: LatencyStats  # ms, one per timed generation
    tpot: LatencyStats  # ms, one per decode step
    mean_ttft_ms: float  # the split of a mean generation: prefill (and its first token) ...
    mean_decode_ms: float  # ... then the sum of its decode steps
    prefill_tokens_per_s: float  # batch x prompt / TTFT p50
    decode_tokens_per_s: float  # batch / TPOT p50
    tokens_per_s: float  # batch x new tokens / mean whole generation
    kv_bytes: int  # the cache at the run's full length, every sequence
    kv_buffer_bytes: int | None  # what the run allocated (from the summary)
    phases: list[PhaseFigures]
    accuracy: AccuracyFigures | None


def generation_figures(g: GenerationRun) -> GenerationFigures:
    ttft, tpot = latency_stats(g.ttft_ns), latency_stats(g.tpot_ns)
    sums = np.array([float(d.sum()) for d in g.decode_steps()]) / 1e6
    mean_decode = float(sums.mean()) if sums.size else math.nan
    mean_total = ttft.mean + (mean_decode if sums.size else 0.0)
    summary = g.summary or {}
    kv = mapping(summary, "kv_cache")
    return GenerationFigures(
        run_id=g.run_id,
        ttft=ttft,
        tpot=tpot,
        mean_ttft_ms=ttft.mean,
        mean_decode_ms=mean_decode,
        prefill_tokens_per_s=_rate(g.batch * g.prompt_len, ttft.p50),
        decode_tokens_per_s=_rate(g.batch, tpot.p50),
        tokens_per_s=_rate(g.batch * g.new_tokens, mean_total),
        kv_bytes=g.kv_bytes_per_token * (g.prompt_len + g.new_tokens) * g.batch,
        kv_buffer_bytes=whole(kv.get("buffer_bytes")),
        phases=[
            p for name in PHASES if (p := _phase(name, mapping(mapping(summary, "phases"), name)))
        ],
        accuracy=_accuracy(mapping(summary, "accuracy")),
    )


def _phase(name: str, d: Mapping[str, Any]) -> PhaseFigures | None:
    if not d:
        return None
    types = d.get("op_types")
    top = [
        (str(t.get("op_type") or t.get("name") or "?"), number(t.get("share")))
        for t in (types if isinstance(types, list) else [])
        if isinstance(t, Mapping)
    ]
    top.sort(key=lambda t: -t[1] if math.isfinite(t[1]) else math.inf)
    return PhaseFigures(
        name=name,
        passes=whole(d.get("passes")),
        time_ms=number(d.get("time_ms")),
        gflop=number(d.get("flops")) / 1e9,
        mbytes=number(d.get("bytes")) / 1e6,
        intensity=number(d.get("intensity")),
        gflops_per_s=number(d.get("gflops_per_s")),
        top_op_types=top[:TOP_OP_TYPES],
    )


def _accuracy(d: Mapping[str, Any]) -> AccuracyFigures | None:
    if not d:
        return None
    cos = mapping(d, "logit_cosine")
    return AccuracyFigures(
        token_agreement=number(d.get("token_agreement")),
        cosine_mean=number(cos.get("mean")),
        cosine_min=number(cos.get("min")),
        positions=whole(d.get("positions")),
        method=str(d.get("method") or ""),
    )


def _rate(tokens: float, ms: float) -> float:
    return tokens / (ms / 1e3) if math.isfinite(ms) and ms > 0 else math.nan
