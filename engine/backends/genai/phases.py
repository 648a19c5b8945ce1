"""Prefill and decode profiled apart: a separate ONNX Runtime session with the profiler on
(never the timed one) runs whole generations; each profiled pass is tagged by its place in
its generation (the first is the prefill, the others decode steps), and the op tables,
bytes and FLOPs are summed per phase. Decode's bytes include the KV cache its attention
reads (the cache inputs' shapes: the buffer, sized to the run's length)."""

from __future__ import annotations

import dataclasses
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.backends.genai.generate import generate
from engine.backends.genai.model import OpenedLLM, open_llm
from engine.config import RunConfig
from engine.events import OpProfile, Progress
from engine.measure.op_stats import OpStat, coverage, node_stats, op_type_stats, stat_to_json
from engine.measure.op_trace import ProfileTrace, parse_ort_profile

WARMUP_GENERATIONS = 1


@dataclass(frozen=True)
class Phase:
    """One phase per pass: mean time, FLOPs and bytes of a pass, and its op types."""

    name: str
    passes: int  # profiled passes of this phase
    time_ms: float
    flops: int
    bytes: int
    op_types: list[OpStat]
    profile: OpProfile  # the phase's passes as a profiling pass (the op table, the roofline)

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else float("nan")

    def to_json(self) -> dict[str, Any]:
        secs = self.time_ms / 1e3
        return {
            "passes": self.passes,
            "time_ms": self.time_ms,
            "flops": self.flops,
            "bytes": self.bytes,
            "intensity": self.intensity,
            "gflops_per_s": self.flops / secs / 1e9 if secs > 0 else None,
            "gb_per_s": self.bytes / secs / 1e9 if secs > 0 else None,
            "op_types": [stat_to_json(s) for s in self.op_types],
        }


def _subset(trace: ProfileTrace, keep: list[int]) -> ProfileTrace:
    """The passes `keep`, renumbered from 0."""
    new = {old: i for i, old in enumerate(keep)}
    runs = tuple(dataclasses.replace(r, run_index=new[r.run_index])
                 for r in trace.runs if r.run_index in new)  # fmt: skip
    nodes = tuple(dataclasses.replace(n, run_index=new[n.run_index])
                  for n in trace.nodes if n.run_index in new)  # fmt: skip
    return ProfileTrace(runs=runs, nodes=nodes)


def _phase(name: str, trace: ProfileTrace) -> Phase:
    types = op_type_stats(trace)
    time_ms = float(np.mean([r.dur_us for r in trace.runs])) / 1e3 if trace.runs else 0.0
    providers = Counter(n.provider for n in {n.name: n for n in trace.nodes}.values())
    profile = OpProfile(
        ops=node_stats(trace),
        op_types=types,
        coverage=coverage(trace),
        runs=len(trace.runs),
        provider_nodes=dict(providers),
        trace=trace,
        phase=name,
    )
    return Phase(
        name,
        len(trace.runs),
        time_ms,
        sum(s.flops or 0 for s in types),
        sum(s.bytes or 0 for s in types),
        types,
        profile,
    )


def profile_phases(
    model_path: str,
    config: RunConfig,
    prompt: np.ndarray,
    new_tokens: int,
    generations: int = 3,
) -> Iterator[Progress | dict[str, Phase]]:
    """Yields progress, then {"prefill": Phase, "decode": Phase}."""
    with tempfile.TemporaryDirectory(prefix="opscope-llm-profile-") as tmp:
        yield Progress("profile", 0, generations, "opening a profiling session")
        llm: OpenedLLM = open_llm(model_path, config, profile_prefix=str(Path(tmp) / "ort"))
        decoder = llm.decoder(prompt.shape[0], prompt.shape[1] + new_tokens)
        passes = 0
        for g in range(WARMUP_GENERATIONS + generations):
            made = generate(decoder, prompt, new_tokens)
            passes += 1 + len(made.step_s)
            done = g - WARMUP_GENERATIONS + 1
            if done > 0:
                yield Progress("profile", done, generations, f"profiled {done}/{generations}")
        path = llm.session.end_profiling()
        trace = parse_ort_profile(Path(path))
    per = passes // (WARMUP_GENERATIONS + generations)  # passes per generation
    kept = [i for i in range(len(trace.runs)) if i >= WARMUP_GENERATIONS * per]
    prefill = [i for i in kept if i % per == 0]
    decode = [i for i in kept if i % per != 0]
    yield {
        "prefill": _phase("prefill", _subset(trace, prefill)),
        "decode": _phase("decode", _subset(trace, decode)),
    }
