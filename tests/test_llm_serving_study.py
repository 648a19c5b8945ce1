"""The LLM Serving dock's logic without Qt: its values become the plan `simulate --llm`
builds from flags (same layouts, same requests), bad values are one line, the table keeps
a real row beside its simulated twin, and the child-process driver sends events, results
and one-line failures."""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
from collections.abc import Generator
from types import SimpleNamespace

import numpy as np
import pytest

from engine.cli.simulate_llm import layouts_from_args, workload_from_args
from engine.config import RunConfig
from engine.errors import ConfigError
from engine.events import Event, Progress, drive
from engine.model.workload import Workload
from engine.run.child_job import child_main
from engine.serve.llm.cost import LLMCost
from engine.serve.llm.study import LLMStudyRequest, llm_serving_config, real_plan, simulate_plan
from engine.serve.llm.study_plan import plan_layouts, plan_workload
from tests.conftest import ROOT
from tests.test_serve_llm import MEASURED
from widgets.models.llm_serving_form import LENGTH_NAMES, ServingForm, checked_plan
from widgets.models.llm_serving_table import HEADERS, LLMServingTable, row_from_summary

DEMO_LLM = ROOT / "resources" / "models" / "demo_llm"
CONTEXT = 2048


def _args(**over: object) -> SimpleNamespace:
    flags = dict(
        traffic="poisson:4",
        seed=3,
        requests=50,
        duration=None,
        prompt_len="32-256",
        new_tokens="64",
        layout="all",
        instances=2,
        chunk_tokens=128,
        prefill_tokens=None,
        max_seqs=16,
        kv_tokens=None,
        prefill_instances=1,
        decode_instances=1,
        kv_gbps=10.0,
        kv_transfer_ms_per_mb=None,
        slo_ttft=200.0,
        slo_tpot=20.0,
    )
    flags.update(over)
    return SimpleNamespace(**flags)


def test_the_dock_values_make_the_plan_the_cli_flags_make() -> None:
    form = ServingForm(
        rate=4,
        seed=3,
        requests=50,
        prompt_len="32-256",
        new_tokens="64",
        max_seqs=16,
        chunk_tokens=128,
        instances=2,
    )
    plan = checked_plan(form, CONTEXT)
    args = _args()
    assert plan_layouts(plan, CONTEXT) == layouts_from_args(args, CONTEXT)  # type: ignore[arg-type]
    ours, cli = plan_workload(plan, CONTEXT), workload_from_args(args, CONTEXT)  # type: ignore[arg-type]
    for a, b in (
        (ours.arrivals, cli.arrivals),
        (ours.prompt, cli.prompt),
        (ours.output, cli.output),
    ):
        np.testing.assert_array_equal(a, b)
    assert len(ours) == 50 and ours.prompt.min() >= 32 and ours.prompt.max() <= 256
    assert (plan.slo_ttft_ms, plan.slo_tpot_ms) == (100.0, 2.5)  # the dock's defaults
    bursts = ServingForm(traffic_kind="spec", spec="bursts:2,12,5,0.3", slo_tpot_ms=0).plan()
    assert bursts.traffic == "bursts:2,12,5,0.3" and bursts.slo_tpot_ms is None
    one = real_plan(checked_plan(form, CONTEXT, "chunked"))
    assert [x.instances for x in plan_layouts(one, CONTEXT)] == [1]  # the real loop: one engine
    disagg = real_plan(checked_plan(form, CONTEXT, "disaggregated"))
    assert plan_layouts(disagg, CONTEXT)[0].total_instances == 2


@pytest.mark.parametrize(
    ("over", "said"),
    [
        ({"rate": 0.0}, "rate must be positive"),
        ({"prompt_len": "4000"}, "exceed the model's context of 2048"),
        ({"prompt_len": "64-8"}, "prompt length '64-8'"),
        ({"new_tokens": "many"}, "new tokens 'many'"),
        ({"traffic_kind": "spec", "spec": ""}, "give a spec"),
        ({"traffic_kind": "spec", "spec": "closed:4"}, "open-loop"),
        ({"kv_gbps": 0.0}, "KV link must be a positive number of Gb/s"),
        ({"slo_ttft_ms": -5.0}, "TTFT SLO must be a positive"),
    ],
)
def test_bad_dock_values_are_one_line(over: dict[str, object], said: str) -> None:
    with pytest.raises(ConfigError) as err:
        checked_plan(ServingForm(**over), CONTEXT)  # type: ignore[arg-type]
    assert said in str(err.value) and "\n" not in str(err.value)


def _summary(layout: str, simulated: bool, ttft: float, tpot: float, insts: int = 1) -> dict:
    return {
        "layout": layout,
        "simulated": simulated,
        "layout_config": {
            "label": layout,
            "instances": insts,
            "prefill_instances": 1,
            "decode_instances": 1,
        },
        "requests": {"count": 10},
        "ttft_ms": {"p50": ttft / 2, "p99": ttft},
        "tpot_ms": {"p50": tpot / 2, "p99": tpot},
        "throughput": {"tokens_per_s": 100.0},
        "goodput": {"requests_per_s": 2.0, "share": 0.5, "slo_ttft_ms": 50.0, "slo_tpot_ms": 5.0},
    }


def test_the_table_sets_a_real_row_beside_its_simulated_twin() -> None:
    table = LLMServingTable()
    table.set_simulated(
        [
            _summary("disaggregated", True, 40, 3, 2),
            _summary("colocated", True, 30, 4, 2),
            _summary("chunked", True, 60, 6, 2),
        ]
    )
    assert [r.layout for r in table.rows] == ["colocated", "chunked", "disaggregated"]
    assert [c[HEADERS.index("p99 in SLOs")] for c in table.cells()] == ["yes", "no", "yes"]
    table.add([_summary("colocated", True, 20, 2, 1), _summary("colocated", False, 25, 2.5, 1)])
    assert [(r.layout, r.instances, r.simulated) for r in table.rows][:3] == [
        ("colocated", 1, True),
        ("colocated", 1, False),
        ("colocated", 2, True),
    ]
    chart = table.chart()
    assert chart.labels[:2] == ["colo ×1", "colo ×2"] and chart.ttft_real[0] == 25
    assert math.isnan(chart.ttft_real[1]) and chart.tpot_sim[3] == 3
    verdict = table.verdict()
    assert (
        "real colocated ×1: p99 within the SLOs, TTFT p99 1.25x, TPOT p99 1.25x the simulated"
        in verdict
    )
    assert "chunked ×2" not in verdict.split("·")[0]  # beyond the TTFT SLO of 50 ms
    table.add([_summary("colocated", False, 35, 2.5, 1)])  # a second real run replaces it
    assert sum(not r.simulated for r in table.rows) == 1
    assert row_from_summary(_summary("disaggregated", False, 1, 1)).instances == 2


def test_simulating_the_plan_on_the_demo_llm_gives_three_layouts() -> None:
    if not (DEMO_LLM / "model.onnx").is_file():
        pytest.fail(f"{DEMO_LLM} is missing: the README's set-up builds it")
    plan = checked_plan(ServingForm(requests=20, prompt_len="16-64", new_tokens="8"), CONTEXT)
    stages: list[str] = []
    config = llm_serving_config(RunConfig(threads=1))
    rows = drive(
        simulate_plan(
            LLMStudyRequest("simulate", Workload(str(DEMO_LLM), config), plan, LENGTH_NAMES)
        ),
        lambda ev: stages.append(getattr(ev, "stage", "")),
    )
    assert "simulation" in stages
    assert [r["layout"] for r in rows] == ["colocated", "chunked", "disaggregated"]
    for r in rows:
        assert r["simulated"] and r["requests"]["count"] == 20
        assert r["ttft_ms"]["p99"] >= r["ttft_ms"]["p50"] > 0 and r["tpot_ms"]["p50"] > 0


def _counting(n: int, fail: bool) -> Generator[Event, None, int]:
    for k in range(n):
        yield Progress("count", k, n)
    if fail:
        raise ConfigError("the count went wrong")
    return n * 10


def test_the_child_driver_sends_events_then_the_result_or_one_line() -> None:
    for fail, last in ((False, ("done", 30)), (True, ("failed", "the count went wrong"))):
        parent, child = mp.Pipe(duplex=False)
        child_main(child, _counting, (3, fail))
        got = []
        with contextlib.suppress(EOFError):  # the child end closed after its last message
            while True:
                got.append(parent.recv())
        events = [ev for kind, batch in got if kind == "events" for ev in batch]
        assert [ev.done for ev in events] == [0, 1, 2] and got[-1] == last


def test_a_simulated_summary_reads_into_a_row_of_finite_numbers() -> None:
    """A summary made by the simulator reads into a row with every number finite."""
    from engine.serve.llm.metrics import summarize_llm
    from engine.serve.llm.sim import simulate_llm

    cost = LLMCost(0.8, 0.041, 3.0e-5, {1: 0.47, 2: 0.5, 4: 0.7, 8: 1.2}, 72, 0.0004, 2048)
    plan = checked_plan(ServingForm(requests=30), CONTEXT)
    work = plan_workload(plan, CONTEXT)
    for layout in plan_layouts(plan, CONTEXT):
        summary = summarize_llm(simulate_llm(work, layout, cost), 200.0, 20.0)
        row = row_from_summary(
            {"layout": layout.name, "layout_config": layout.to_json(), "simulated": True, **summary}
        )
        numbers = [
            row.ttft_p50,
            row.ttft_p99,
            row.tpot_p50,
            row.tpot_p99,
            row.goodput_per_s,
            row.goodput_share,
            row.tokens_per_s,
        ]
        assert all(math.isfinite(v) for v in numbers) and row.requests == 30


def test_the_window_asks_for_a_prefix_cache_and_shows_its_effect() -> None:
    """The dock's shared prefixes and prefix cache become the plan `simulate --llm
    --shared-prefix --prefix-cache` builds; a study row shows the hit rate and the TTFT
    without; a cache without shared prefixes is refused in one line."""
    from engine.serve.llm.requests import SharedPrefix
    from engine.serve.llm.study import _simulated

    form = ServingForm(requests=60, prompt_len="100-200", shared_groups=2, shared_tokens=64,
                       prefix_blocks=32)  # fmt: skip
    plan = checked_plan(form, 2048, "chunked")
    assert plan.shared_prefix == "2,64" and plan.prefix_cache == 32
    assert SharedPrefix.parse(plan.shared_prefix).groups == 2
    work = plan_workload(plan, 2048)
    layout = plan_layouts(plan, 2048)[0]
    row = _simulated(work, layout, MEASURED, plan)
    assert row["prefix_cache"]["hit_rate"] > 0 and "without_prefix_cache" in row
    cell = row_from_summary(row).cells()[HEADERS.index("Prefix cache")]
    assert "hit" in cell and "without" in cell
    with pytest.raises(ConfigError, match="share no prefix"):
        checked_plan(ServingForm(prefix_blocks=32), 2048)
