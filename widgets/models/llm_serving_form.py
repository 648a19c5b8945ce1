"""The LLM Serving dock's values, without Qt, and the study they ask for: an
`engine.serve.llm.study_plan.LLMPlan` (the plan `simulate --llm` and `load --llm` build from
their flags), checked against the model's context before any work starts."""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.api import DEFAULT_NEW, ConfigError, LLMPlan, kv_ms_per_mb, plan_layouts, plan_workload

LENGTH_NAMES = ("prompt length", "new tokens")  # how errors name the two length fields


@dataclass(frozen=True)
class ServingForm:
    """What the dock shows. `traffic_kind` "poisson" uses `rate`; "spec" uses `spec`
    (bursts:BASE,PEAK,PERIOD_S,DUTY or any open-loop spec). SLOs of 0 mean none."""

    traffic_kind: str = "poisson"
    rate: float = 8.0
    spec: str = "bursts:2,12,5,0.3"
    seed: int = 0
    requests: int = 100
    prompt_len: str = "32-256"
    new_tokens: str = "64"
    max_seqs: int = 16
    chunk_tokens: int = 128
    instances: int = 2  # colocated and chunked
    prefill_instances: int = 1
    decode_instances: int = 1
    kv_gbps: float = 10.0
    slo_ttft_ms: float = 100.0
    slo_tpot_ms: float = 2.5
    real_layout: str = "colocated"
    shared_groups: int = 0  # prompts begin with one of this many shared prefixes (0: none)
    shared_tokens: int = 128  # tokens of each shared prefix
    prefix_blocks: int = 0  # prefix cache per prefilling engine, in 16-token blocks (0: off)

    def traffic(self) -> str:
        if self.traffic_kind == "poisson":
            return f"poisson:{self.rate:g}"
        text = self.spec.strip()
        if not text:
            raise ConfigError("traffic: give a spec such as bursts:2,12,5,0.3")
        return text

    def plan(self, layout: str = "all") -> LLMPlan:
        """The study these values ask for; a ConfigError saying what is wrong otherwise."""
        return LLMPlan(
            traffic=self.traffic(),
            seed=self.seed,
            requests=self.requests,
            prompt_len=self.prompt_len.strip() or None,  # empty: a trace's own lengths
            new_tokens=self.new_tokens.strip() or DEFAULT_NEW,
            layout=layout,
            instances=self.instances,
            chunk_tokens=self.chunk_tokens,
            max_seqs=self.max_seqs,
            prefill_instances=self.prefill_instances,
            decode_instances=self.decode_instances,
            kv_ms_per_mb=kv_ms_per_mb(self.kv_gbps),
            slo_ttft_ms=_slo(self.slo_ttft_ms, "TTFT"),
            slo_tpot_ms=_slo(self.slo_tpot_ms, "TPOT"),
            shared_prefix=f"{self.shared_groups},{self.shared_tokens}"
            if self.shared_groups
            else None,
            prefix_cache=self.prefix_blocks,
        )


def checked_plan(form: ServingForm, context_length: int, layout: str = "all") -> LLMPlan:
    """`form.plan(layout)` with its layouts and requests built once, so that bad values
    (a rate of 0, prompts beyond the context) are refused in the window, in one line."""
    plan = form.plan(layout)
    plan_layouts(plan, context_length)
    work = plan_workload(plan, context_length, LENGTH_NAMES)
    if plan.prefix_cache and work.blocks is None:
        raise ConfigError("prefix cache: the prompts share no prefix; set Shared prefixes, or "
                          "replay a Mooncake trace (hash_ids)")  # fmt: skip
    return plan


def _slo(value: float, name: str) -> float | None:
    if value == 0:
        return None
    if not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"the {name} SLO must be a positive number of ms (0: none)")
    return float(value)
