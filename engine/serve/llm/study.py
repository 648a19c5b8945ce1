"""An LLM serving study as long work: the three layouts simulated side by side from the
model's calibration, or one layout served for real with the simulator's answer for the
same layout and requests beside it. Generators of progress events that return summary
rows (`summarize_llm`'s dicts plus `layout`, `layout_config` and `simulated`)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from engine.backends.genai.model import open_llm, read_config
from engine.backends.genai.weight_choice import choose_weights
from engine.backends.genai.weights import PRECISIONS as SERVED_PRECISIONS
from engine.config import RunConfig
from engine.errors import ConfigError
from engine.events import Event, Progress
from engine.model.workload import Workload
from engine.serve.llm.cal_plan import Needs, needs_from
from engine.serve.llm.calibrate import load_or_calibrate_llm
from engine.serve.llm.cost import LLMCost
from engine.serve.llm.metrics import summarize_llm
from engine.serve.llm.prefix_cache import check_prefix_fits
from engine.serve.llm.real_loop import LLMServingLoop, check_real_layout
from engine.serve.llm.requests import LLMWorkload
from engine.serve.llm.sim import Layout, simulate_llm
from engine.serve.llm.study_plan import LLMPlan, plan_layouts, plan_workload

Rows = list[dict[str, Any]]


def llm_serving_config(config: RunConfig) -> RunConfig:
    """The config a generating model is served with: its precision when it has one
    (fp32, fp16, int8-weights, int4-weights; anything else fp32), at batch 1 (serving batches
    sequences itself), the rest as given."""
    precision = config.precision if config.precision in SERVED_PRECISIONS else "fp32"
    return dataclasses.replace(config, precision=precision, batch=1)


def served_folder(model: str, config: RunConfig) -> Generator[Event, None, str]:
    """The folder served for `config.precision`: the model's own for fp32, else its
    fp16 or weight-only variant (built once, cached; progress while it builds)."""
    llm = read_config(model)
    if config.precision != "fp32":
        yield Progress("variant", 0, None, f"building the {config.precision} model (cached)")
    # the build a weight-only precision's search picked to meet the accuracy target, as a
    # generation runs it (cached: the search runs once per model, precision and target)
    folder, _ = yield from choose_weights(llm, config)
    return str(folder)


def served_calibration(
    model: str,
    config: RunConfig,
    needs: Needs,
    remeasure: bool = False,
    remedy: str = "--recalibrate",
) -> Generator[Event, None, tuple[str, LLMCost]]:
    """The folder served for `config` and its calibration of the points `needs` asks for
    (reused from the cache, or measured now); `remedy`: how the user measures again."""
    folder = yield from served_folder(model, config)
    cost = yield from load_or_calibrate_llm(folder, config, remeasure, needs, remedy)
    return folder, cost


def real_plan(plan: LLMPlan) -> LLMPlan:
    """The plan as the real loop serves it: one engine for colocated and chunked."""
    if plan.layout == "all":
        raise ConfigError("the real loop serves one layout per run: pick one")
    return plan if plan.layout == "disaggregated" else dataclasses.replace(plan, instances=1)


@dataclass(frozen=True)
class LLMStudyRequest:
    """The window's LLM Serving study as a job: every layout simulated ("simulate"), or the
    plan's one layout served for real after the simulator's answer ("real")."""

    kind: str  # simulate | real
    workload: Workload  # the model folder and the config it is served at
    plan: LLMPlan  # (its trace a file of this machine too)
    what: tuple[str, str] = ("--prompt-len", "--new-tokens")  # the length knobs' names
    remeasure: bool = False  # calibrate again rather than use the cached calibration
    session: str | None = None  # where the study is recorded
    remedy: str = "--recalibrate"  # how its user measures again (the window: its button)
    job_name: ClassVar[str] = "LLM serving study"


def simulate_plan(req: LLMStudyRequest) -> Generator[Event, None, Rows]:
    """Every layout of the request's plan simulated on the same requests (calibrating first,
    or the calibration cached for this model, config and machine unless `remeasure`)."""
    plan = req.plan
    work, layouts = _planned(req, plan, real=False)
    _, cost = yield from _calibration(req, work, layouts)
    rows = []
    for k, layout in enumerate(layouts):
        yield Progress("simulation", k, len(layouts), f"simulating {layout.describe()}")
        rows.append(_simulated(work, layout, cost, plan))
    return rows


def serve_plan(req: LLMStudyRequest) -> Generator[Event, None, Rows]:
    """The plan's one layout served for real by the serving loop, after the simulator's
    answer for that layout and those requests: [simulated row, real row]."""
    plan = real_plan(req.plan)
    work, (layout,) = _planned(req, plan, real=True)
    folder, cost = yield from _calibration(req, work, [layout])
    config = req.workload.config
    simulated = _simulated(work, layout, cost, plan)
    yield Progress("serving", 0, len(work), f"opening the model for {layout.describe()}")
    loop = LLMServingLoop(open_llm(folder, config), work, layout, seed=plan.seed,
                          prefix_blocks=plan.prefix_cache)  # fmt: skip
    yield from loop.run()
    real = {
        "layout": layout.name,
        "layout_config": layout.to_json(),
        "simulated": False,
        **summarize_llm(loop.book, plan.slo_ttft_ms, plan.slo_tpot_ms),
        # requests without their last token: interrupted, or stopped at the drain deadline
        "unfinished": len(work) - int(np.isfinite(loop.book.done).sum()),
    }
    return [simulated, real]


def _planned(req: LLMStudyRequest, plan: LLMPlan, real: bool) -> tuple[LLMWorkload, list[Layout]]:
    """The plan's layouts (`real`: its one layout, which the real loop must serve) and its
    requests, at the model's context; its SLOs and its prefix cache checked."""
    plan.check_slos()
    llm = read_config(req.workload.model)
    context = llm.context_length
    layouts = plan_layouts(plan, context)
    if real:
        layouts = layouts[:1]
        check_real_layout(layouts[0])
    work = plan_workload(plan, context, req.what)
    _check_prefix(plan, work, llm.shape.kv_bytes_per_token(2))
    return work, layouts


def _calibration(
    req: LLMStudyRequest, work: LLMWorkload, layouts: list[Layout]
) -> Generator[Event, None, tuple[str, LLMCost]]:
    """The served folder and its calibration of the points these layouts and requests read."""
    needs = needs_from(work.prompt, layouts)
    model, config = req.workload.model, req.workload.config
    return (yield from served_calibration(model, config, needs, req.remeasure, req.remedy))


def _simulated(work: LLMWorkload, layout: Layout, cost: LLMCost, plan: LLMPlan) -> dict[str, Any]:
    t0 = time.perf_counter()
    book = simulate_llm(work, layout, cost, None, plan.prefix_cache)
    row = {
        "layout": layout.name,
        "layout_config": layout.to_json(),
        "simulated": True,
        **summarize_llm(book, plan.slo_ttft_ms, plan.slo_tpot_ms),
    }
    if plan.prefix_cache:  # the same requests without it, for the cache's effect
        plain = summarize_llm(simulate_llm(work, layout, cost), plan.slo_ttft_ms, plan.slo_tpot_ms)
        row["without_prefix_cache"] = {k: plain[k] for k in ("ttft_ms", "tpot_ms", "throughput")}
    row["simulator_s"] = time.perf_counter() - t0
    return row


def _check_prefix(plan: LLMPlan, work: LLMWorkload, kv_bytes_per_token: int) -> None:
    """A prefix cache needs prompts that share prefixes, and must fit in memory."""
    if not plan.prefix_cache:
        return
    if work.blocks is None:
        raise ConfigError("prefix cache: the prompts share no prefix (shared prefixes, or a "
                          "Mooncake trace with hash_ids)")  # fmt: skip
    check_prefix_fits(plan.prefix_cache, work.block_tokens, kv_bytes_per_token)
