"""An LLM serving study as values: traffic, request lengths, layout settings and SLOs,
turned into the simulator's layouts and requests by pure functions. `simulate --llm`,
`load --llm` and the app's LLM Serving dock build the same layouts and workload from it."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from engine.errors import ConfigError
from engine.serve.llm.requests import LLMWorkload, SharedPrefix, make_workload, parse_length
from engine.serve.llm.sim import LAYOUTS, Layout
from engine.serve.traffic.schedule import make_schedule, parse_traffic

KV_GBPS = 10.0  # the modelled link between prefill and decode instances
DEFAULT_PROMPT = "512"
DEFAULT_NEW = "128"


def kv_ms_per_mb(gbps: float) -> float:
    """Milliseconds to move one MB (8e6 bits) over a link of `gbps` Gb/s."""
    if not (gbps > 0 and math.isfinite(gbps)):
        raise ConfigError(f"the KV link must be a positive number of Gb/s, got {gbps:g}")
    return 8.0 / gbps


@dataclass(frozen=True)
class LLMPlan:
    """What to serve and how. `prompt_len` None: 512 tokens, or a trace's size column;
    `instances` None: prefill + decode instances (the machines disaggregation uses);
    `prefill_tokens` None: the model's context."""

    local_files: ClassVar[tuple[str, ...]] = ("traffic",)  # trace:FILE

    traffic: str
    seed: int = 0
    requests: int | None = None  # the first N arrivals (else `duration_s` of traffic)
    duration_s: float = 60.0
    prompt_len: str | None = None
    new_tokens: str = DEFAULT_NEW
    layout: str = "all"  # a name from LAYOUTS, or "all"
    instances: int | None = None
    chunk_tokens: int = 256
    prefill_tokens: int | None = None
    max_seqs: int = 64
    kv_tokens: int = 0
    prefill_instances: int = 1
    decode_instances: int = 1
    kv_ms_per_mb: float = 8.0 / KV_GBPS
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None
    shared_prefix: str | None = None  # GROUPS,TOKENS: prompts that begin alike
    prefix_block: int = 16  # tokens per prefix-cache block (vLLM's default)
    prefix_cache: int = 0  # blocks of prefix cache per prefilling instance (0: none)

    def check_slos(self) -> None:
        for flag, value in (("--slo-ttft", self.slo_ttft_ms), ("--slo-tpot", self.slo_tpot_ms)):
            if value is not None and not (value > 0 and math.isfinite(value)):
                raise ConfigError(f"{flag} must be a positive number of ms")


def plan_layouts(plan: LLMPlan, context_length: int) -> list[Layout]:
    """The plan's layouts (one, or all three on the same machines), each checked."""
    name = plan.layout.lower()
    if name != "all" and name not in LAYOUTS:
        raise ConfigError(f"--layout {name!r}: expected {', '.join(LAYOUTS)} or all")
    p, d = plan.prefill_instances, plan.decode_instances
    base = Layout(
        name="colocated",
        instances=p + d if plan.instances is None else plan.instances,
        chunk_tokens=plan.chunk_tokens,
        prefill_tokens=context_length if plan.prefill_tokens is None else plan.prefill_tokens,
        max_seqs=plan.max_seqs,
        kv_tokens=plan.kv_tokens,
        prefill_instances=p,
        decode_instances=d,
        kv_ms_per_mb=plan.kv_ms_per_mb,
    )
    names = LAYOUTS if name == "all" else (name,)
    out = [dataclasses.replace(base, name=n) for n in names]
    for layout in out:
        layout.check()
    return out


def plan_workload(
    plan: LLMPlan, context_length: int, what: tuple[str, str] = ("--prompt-len", "--new-tokens")
) -> LLMWorkload:
    """The plan's requests: seeded arrivals, prompt and output lengths that fit the
    model's context; `what` names the two lengths in errors."""
    prompt = parse_length(plan.prompt_len or DEFAULT_PROMPT, what[0])
    output = parse_length(plan.new_tokens, what[1])
    spec = parse_traffic(plan.traffic)
    shared = SharedPrefix.parse(plan.shared_prefix) if plan.shared_prefix else None
    if spec.closed:
        raise ConfigError(
            "LLM serving takes open-loop traffic: poisson, constant, bursts, "
            "ramp, trace (not closed:N)"
        )
    schedule = make_schedule(spec, plan.duration_s, plan.seed, 0.0, requests=plan.requests)
    if not len(schedule):
        raise ConfigError(f"traffic {spec.text} brings no request in {plan.duration_s:g} s")
    from_trace = plan.prompt_len is None and schedule.sizes is not None
    if from_trace and schedule.outputs is not None and schedule.sizes is not None:
        total = schedule.sizes + schedule.outputs  # an LLM trace: each request's own tokens
        worst = int(np.argmax(total))
        if int(total[worst]) > context_length:
            raise ConfigError(
                f"request {worst + 1} of trace {spec.path} (prompt {int(schedule.sizes[worst])}"
                f" + {int(schedule.outputs[worst])} new tokens) exceeds the model's context "
                f"of {context_length} tokens"
            )
        return make_workload(schedule, prompt, output, plan.seed, prompt_from_trace=True,
                             shared=shared, block=plan.prefix_block)  # fmt: skip
    if schedule.outputs is not None:  # --prompt-len given: both lengths from the flags
        schedule = replace(schedule, outputs=None)
    longest = int(schedule.sizes.max()) if from_trace and schedule.sizes is not None else prompt.hi
    if longest + output.hi > context_length:
        raise ConfigError(
            f"prompts up to {longest} + up to {output.hi} new tokens = {longest + output.hi} "
            f"exceed the model's context of {context_length} tokens"
        )
    return make_workload(schedule, prompt, output, plan.seed, prompt_from_trace=from_trace,
                         shared=shared, block=plan.prefix_block)  # fmt: skip
