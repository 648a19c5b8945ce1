"""The LLM serving simulator checked against the real loop on the demo LLM: the same seeded
workload (Poisson arrivals, lengths drawn by llm_workload) served for real (`load --llm`'s
loop) and simulated, colocated, chunked and disaggregated (1 prefill + 1 decode engine, a
modelled 10 Gb/s KV link), at 30/60/85% of the capacity the simulator
predicts. Three rounds, interleaved; each round calibrates the simulator afresh (2 s), so a
slow minute on a shared machine hits both sides of a comparison alike. The iteration log
of the real runs says where a disagreement comes from: each decode-only and prefill-only
iteration's time against the cost model's, and the gaps between iterations. Run:
    .venv/bin/python bench/llm_sim_vs_real.py [--out bench/results/llm_sim_vs_real.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llm_sim import cpu_model  # noqa: E402
from results_file import publish  # noqa: E402

from engine.backends.genai.model import OpenedLLM, open_llm  # noqa: E402
from engine.config import RunConfig  # noqa: E402
from engine.events import drive  # noqa: E402
from engine.serve.llm.calibrate import load_or_calibrate_llm  # noqa: E402
from engine.serve.llm.cost import LLMCost, Warmth  # noqa: E402
from engine.serve.llm.metrics import summarize_llm  # noqa: E402
from engine.serve.llm.real_loop import LLMServingLoop  # noqa: E402
from engine.serve.llm.requests import LLMWorkload, make_workload, parse_length  # noqa: E402
from engine.serve.llm.sim import Layout, simulate_llm  # noqa: E402
from engine.serve.traffic.schedule import make_schedule, parse_traffic  # noqa: E402

MODEL = ROOT / "resources" / "models" / "demo_llm"
PROMPT, NEW = "32-256", "32"
LOADS = (0.3, 0.6, 0.85)
ROUNDS = 3
RUN_S = 6.0  # seconds of traffic per real run
MAX_SEQS, CHUNK = 16, 64
KV_MS_PER_MB = 0.8  # disaggregated: a 10 Gb/s link between the two engines (modelled)
LAYOUTS = (Layout("colocated", instances=1, max_seqs=MAX_SEQS),
           Layout("chunked", instances=1, max_seqs=MAX_SEQS, chunk_tokens=CHUNK),
           Layout("disaggregated", max_seqs=MAX_SEQS, prefill_instances=1, decode_instances=1,
                  kv_ms_per_mb=KV_MS_PER_MB))  # fmt: skip
TOLERANCE = 0.15


def workload(rate: float, requests: int) -> LLMWorkload:
    schedule = make_schedule(parse_traffic(f"poisson:{rate:g}"), 0, 0, requests=requests)
    return make_workload(schedule, parse_length(PROMPT, "p"), parse_length(NEW, "n"), 0)


def capacity(cost: LLMCost, layout: Layout) -> float:
    """Requests per second the simulated engine serves when 400 arrive at once."""
    n = 400
    w = workload(1.0, n)
    burst = LLMWorkload(np.zeros(n), w.prompt, w.output)
    return float(summarize_llm(simulate_llm(burst, layout, cost))["throughput"]["requests_per_s"])


def calibrate() -> LLMCost:
    return drive(load_or_calibrate_llm(str(MODEL), RunConfig(threads=1), remeasure=True))


def real(llm: OpenedLLM, w: LLMWorkload, layout: Layout) -> tuple[dict[str, Any], Any]:
    loop = LLMServingLoop(llm, w, layout, seed=0)
    drive(loop.run())
    assert loop.unfinished() == 0
    return summarize_llm(loop.book), loop.engines


def extras(cost: LLMCost, start: np.ndarray, end: np.ndarray, batch: np.ndarray,
           tokens: np.ndarray, prompts: np.ndarray, split: bool) -> np.ndarray:  # fmt: skip
    """The calibrated extras of each iteration of one engine (in time order), walked
    through the states the simulator walks (`LLMCost.iteration_extra_ms`): after a prefill
    pass, the decode steps' extra; after the engine sat idle, the first passes' extra. A
    gap between iterations at least as long as the shortest calibrated pause is a pause
    (the loop's own work between busy iterations takes about 0.02 ms)."""
    out = np.zeros(len(batch))
    warm = Warmth()
    shortest = (cost.after_idle_pauses_ms or (np.inf,))[0]
    prev_end = -np.inf
    for i, (b, t, n) in enumerate(
        zip(batch.astype(int), tokens.astype(int), prompts.astype(int), strict=True)
    ):
        gap_ms = (start[i] - prev_end) * 1e3
        prev_end = end[i]
        if gap_ms >= shortest:
            warm = warm.paused(gap_ms)
        out[i], warm = cost.iteration_extra_ms(warm, n, t, b > 0, split)
    return out


def iteration_check(engines: Any, cost: LLMCost) -> dict[str, float]:
    """Real iteration times against the cost model's for the same iterations (the same
    batch, context, prompt chunks): ratios of the sums by kind and in all (the service-time
    error that queueing amplifies), the median gap between back-to-back iterations (ms),
    and the mean decode batch."""
    # each engine's iterations in its time order (the extras are per engine)
    it = np.asarray([i for e in engines for i in e.iterations], np.float64)
    owner = np.concatenate([np.full(len(e.iterations), k) for k, e in enumerate(engines)])
    start, end, batch, ctx, tokens, passes, scores, past, l_pass, l_tok, l_sco = it.T
    took = (end - start) * 1e3
    npre = passes - (batch > 0)
    chunked = np.concatenate([np.full(len(e.iterations), e.split) for e in engines])
    later = (l_pass, l_tok, l_sco)  # the passes that continue a prompt (calibration 6)
    prefill = np.where(
        chunked,
        cost.prefill_sums_ms(npre, tokens, scores, past, later, split=True),
        cost.prefill_sums_ms(npre, tokens, scores, past, later, split=False),
    )
    model = (
        prefill
        + np.asarray([cost.decode_step_ms(int(b), int(c)) for b, c in zip(batch, ctx, strict=True)])
        + np.concatenate([extras(cost, start[owner == k], end[owner == k], batch[owner == k],
                                 tokens[owner == k], npre[owner == k], e.split)
                          for k, e in enumerate(engines)])
        + cost.iteration_ms  # the loop's own work in each iteration (calibration 5)
    )  # fmt: skip
    kinds = {"decode": (tokens == 0), "prefill": (tokens > 0) & (batch == 0),
             "mixed": (tokens > 0) & (batch > 0), "all": np.ones(len(it), bool)}  # fmt: skip
    out = {k: float(took[m].sum() / model[m].sum()) if m.any() else float("nan")
           for k, m in kinds.items()}  # fmt: skip
    gaps = (start[1:] - end[:-1]) * 1e3
    busy = batch[1:] > 0
    out["gap_ms"] = float(np.median(gaps[busy])) if busy.any() else float("nan")
    out["batch_mean"] = float(batch[batch > 0].mean()) if (batch > 0).any() else float("nan")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "llm_sim_vs_real.md"))
    ap.add_argument("--each-row", action="store_true",
                    help="calibrate again before every real run (about 14 s each), not once "
                    "per round: the simulation then predicts at the speed the machine has "
                    "seconds before the run")  # fmt: skip
    args = ap.parse_args()
    load = os.getloadavg()[0]
    t_start = time.perf_counter()
    llm = open_llm(MODEL, RunConfig(threads=1))
    cost0 = calibrate()
    rates = {lay.name: [f * capacity(cost0, lay) for f in LOADS] for lay in LAYOUTS}
    works = {(lay.name, r): workload(r, max(20, round(r * RUN_S))) for lay in LAYOUTS
             for r in rates[lay.name]}  # fmt: skip
    keys = list(works)
    reals: dict[Any, list[dict[str, Any]]] = {k: [] for k in keys}
    sims: dict[Any, list[dict[str, Any]]] = {k: [] for k in keys}
    checks: dict[Any, list[dict[str, float]]] = {k: [] for k in keys}
    costs = []
    by_name = {lay.name: lay for lay in LAYOUTS}
    for rnd in range(ROUNDS):
        cost = cost0 if rnd == 0 else calibrate()
        costs.append(cost)
        for i, key in enumerate(keys if rnd % 2 == 0 else keys[::-1]):  # both directions
            if args.each_row and (rnd or i):
                cost = calibrate()  # seconds before the run: the machine's speed now
            layout, w = by_name[key[0]], works[key]
            r, engine = real(llm, w, layout)
            reals[key].append(r)
            checks[key].append(iteration_check(engine, cost))
            sims[key].append(summarize_llm(simulate_llm(w, layout, cost)))
            print(f"round {rnd + 1} {key[0]} {key[1]:.1f}/s: real TTFT {r['ttft_ms']['p50']:.2f} "
                  f"TPOT {r['tpot_ms']['p50']:.3f}; sim TTFT {sims[key][-1]['ttft_ms']['p50']:.2f} "
                  f"TPOT {sims[key][-1]['tpot_ms']['p50']:.3f}", flush=True)  # fmt: skip
    wall = time.perf_counter() - t_start
    text = report(rates, works, reals, sims, checks, costs, load, wall)
    if args.each_row:
        text = text.replace(
            "each round recalibrates the simulator",
            "every row of every round "
            "recalibrates the simulator seconds before its real run (`--each-row`)",
        )
    publish(text, args.out)


def _med(rows: list[dict[str, Any]], metric: str) -> tuple[float, float, float]:
    v = [r[metric]["p50"] for r in rows]
    return float(np.median(v)), float(min(v)), float(max(v))


def report(rates: Any, works: Any, reals: Any, sims: Any, checks: Any, costs: list[LLMCost],
           load: float, wall: float) -> str:  # fmt: skip
    c = costs[0]
    steps = ", ".join(f"{b}: {ms:.3f}" for b, ms in sorted(c.decode_ms.items()))

    def rows(extras: tuple[tuple[float, ...], ...]) -> str:  # the first three of each row
        return "; ".join(", ".join(f"+{x:.3f}" for x in row[:3]) for row in extras)

    lines = [
        f"# LLM serving: simulator against the real loop ({time.strftime('%Y-%m-%d')})",
        "",
        f"{cpu_model()} (`lscpu`), {os.cpu_count()} CPUs shared with other work, load "
        f"average {load:.2f} before the run; {wall:.0f} s in all. `bench/llm_sim_vs_real.py`.",
        "",
        f"Demo LLM, fp32, 1 intra-op thread. Workload: Poisson arrivals, about {RUN_S:g} s of "
        f"traffic per run, prompt {PROMPT} tokens (uniform), {NEW} new tokens, seed 0: the "
        f"same requests served for real (`opscope load --llm`'s loop) and simulated; one "
        f"engine, at most {MAX_SEQS} sequences; chunked: {CHUNK} prompt tokens per iteration. "
        f"Loads are shares of the capacity the simulator predicts (400 requests at once). "
        f"{ROUNDS} rounds, interleaved; each round recalibrates the simulator (first round: "
        f"prefill ~ {c.prefill_a_ms:.3f} + {c.prefill_b_ms:.5f}*L + {c.prefill_c_ms:.3e}*L^2 "
        + (
            f"ms; a pass continuing a prompt, k tokens after d: {c.continuing[0]:.3f} + "
            f"{c.continuing[1]:.5f}*k + {c.continuing[2]:.3e}*k*(d+k) + {c.continuing[3]:.2e}*d "
            if c.continuing
            else ""
        )
        + f"ms; decode step ms by batch {steps}, + {c.decode_slope_ms * 1e3:.3f} us per context "
        f"token; the first decode steps after an idle pause of "
        f"{', '.join(f'{ms:g}' for ms in c.after_idle_pauses_ms)} ms: "
        f"{rows(c.after_idle_ms)} ms "
        f"(steps 0-2); 64-token prompt passes after them: "
        f"{rows(c.after_idle_prompt_ms) or 'not timed'} "
        f"ms (passes 0-2); an idle engine starts a request {c.idle_start_ms:.3f} ms after it "
        "is due). "
        "Real: median of the rounds' p50 [min-max]; simulated: median of the "
        f"rounds' p50 [min-max]. Within {TOLERANCE:.0%}: |real/sim - 1| <= {TOLERANCE:g} on "
        "the medians.",
        "",
        "| layout | load | req/s | requests | TTFT p50 real | TTFT p50 sim | ratio | within | "
        "TPOT p50 real | TPOT p50 sim | ratio | within |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (name, rate), w in works.items():
        share = rate / rates[name][-1] * LOADS[-1]
        row = f"| {name} | {share:.0%} | {rate:.1f} | {len(w)} "
        for metric, fmt in (("ttft_ms", ".2f"), ("tpot_ms", ".3f")):
            rm, rlo, rhi = _med(reals[(name, rate)], metric)
            sm, slo, shi = _med(sims[(name, rate)], metric)
            ratio = rm / sm
            ok = "yes" if abs(ratio - 1) <= TOLERANCE else "**no**"
            row += (f"| {rm:{fmt}} [{rlo:{fmt}}-{rhi:{fmt}}] | {sm:{fmt}} [{slo:{fmt}}-{shi:{fmt}}]"
                    f" | {ratio:.2f} | {ok} ")  # fmt: skip
        lines.append(row + "|")
    lines += twin(works, reals, sims)
    lines += [
        "",
        "## Where the time goes in the real loop (medians over the rounds)",
        "",
        "Each real iteration's time against the cost model's for that same iteration (its "
        "decode batch and context, its prompt chunks, the loop's own work in it), summed by "
        "kind: decode-only, prefill-only, both; `all` is the service-time error the queue "
        "sees. `gap`: the median time between back-to-back iterations (the loop's work "
        "between them).",
        "",
        "| layout | req/s | decode | prefill | mixed | all | gap ms | decode batch |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, rate in works:
        ch = checks[(name, rate)]
        med = {k: float(np.nanmedian([x[k] for x in ch])) for k in ch[0]}
        lines.append(f"| {name} | {rate:.1f} | {med['decode']:.2f} | {med['prefill']:.2f} | "
                     f"{med['mixed']:.2f} | {med['all']:.2f} | {med['gap_ms']:.3f} | "
                     f"{med['batch_mean']:.2f} |")  # fmt: skip
    return "\n".join(lines)


def twin(works: Any, reals: Any, sims: Any) -> list[str]:
    """The twin test (issue 28): per row, the simulator (round 1's calibration) against the
    first real run, beside the second real run's difference from the first (the rounds
    run minutes apart, in opposite orders)."""
    lines = [
        "",
        "## Twin test: the simulator against the real loop's own repeat spread",
        "",
        "Per row: `repeat`, round 2's real run against round 1's; `sim`, round 1's "
        "simulation against round 1's real run. Median of the absolute differences over "
        "the rows, and the rows with TTFT p50 within 5% and TTFT p99 within 10%.",
        "",
        "| layout | req/s | repeat ΔTTFT p50 | repeat ΔTTFT p99 | repeat ΔTPOT p50 "
        "| sim ΔTTFT p50 | sim ΔTTFT p99 | sim ΔTPOT p50 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    metrics = [("ttft_ms", "p50"), ("ttft_ms", "p99"), ("tpot_ms", "p50")]
    rep: list[list[float]] = []
    sim: list[list[float]] = []
    for key in works:
        first, second = reals[key][0], reals[key][1]
        r = [second[m][q] / first[m][q] - 1 for m, q in metrics]
        d = [sims[key][0][m][q] / first[m][q] - 1 for m, q in metrics]
        rep.append(r)
        sim.append(d)
        lines.append(
            f"| {key[0]} | {key[1]:.1f} | " + " | ".join(f"{x:+.1%}" for x in r + d) + " |"
        )

    def summary(rows: list[list[float]]) -> str:
        a = np.abs(np.asarray(rows))
        ok = int(((a[:, 0] <= 0.05) & (a[:, 1] <= 0.10)).sum())
        return (f"{np.median(a[:, 0]):.1%} | {np.median(a[:, 1]):.1%} | {np.median(a[:, 2]):.1%} "
                f"| {ok} of {len(rows)}")  # fmt: skip

    lines += [
        "",
        "| | median abs ΔTTFT p50 | ΔTTFT p99 | ΔTPOT p50 | rows within 5% / 10% |",
        "|---|---|---|---|---|",
        f"| real loop, repeat | {summary(rep)} |",
        f"| simulator | {summary(sim)} |",
    ]
    return lines


if __name__ == "__main__":
    main()
