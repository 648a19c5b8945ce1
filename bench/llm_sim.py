"""LLM serving, simulated on the demo LLM: the three layouts (colocated, chunked prefill,
disaggregated prefill/decode) on the same requests at three loads, with the same number
of instances, and the simulator's own speed (100k requests per layout). Calibrated on this
machine first (cached). Checked against the real loop by llm_sim_vs_real.py. Run:
    .venv/bin/python bench/llm_sim.py [--out bench/results/llm_sim.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402

from engine.config import RunConfig  # noqa: E402
from engine.events import drive  # noqa: E402
from engine.serve.llm.calibrate import load_or_calibrate_llm  # noqa: E402
from engine.serve.llm.metrics import summarize_llm  # noqa: E402
from engine.serve.llm.requests import LLMWorkload, make_workload, parse_length  # noqa: E402
from engine.serve.llm.sim import LAYOUTS, Layout, simulate_llm  # noqa: E402
from engine.serve.traffic.schedule import make_schedule, parse_traffic  # noqa: E402

MODEL = ROOT / "resources" / "models" / "demo_llm"
RATES = (8.0, 16.0, 22.0)
REQUESTS = 20_000
SPEED_REQUESTS = 100_000
PROMPT, NEW = "128-1024", "128"
SLO_TTFT_MS, SLO_TPOT_MS = 200.0, 10.0
BASE = Layout("colocated", instances=2, chunk_tokens=256, prefill_tokens=2048, max_seqs=64,
              prefill_instances=1, decode_instances=1, kv_ms_per_mb=0.8)  # fmt: skip


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def workload(rate: float, requests: int) -> LLMWorkload:
    schedule = make_schedule(parse_traffic(f"poisson:{rate:g}"), 0, 0, requests=requests)
    return make_workload(schedule, parse_length(PROMPT, "p"), parse_length(NEW, "n"), 0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "llm_sim.md"))
    args = ap.parse_args()
    cost = drive(load_or_calibrate_llm(str(MODEL), RunConfig(threads=1)))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    steps = ", ".join(f"{b}: {ms:.3f}" for b, ms in sorted(cost.decode_ms.items()))
    lines = [
        f"# LLM serving, simulated ({time.strftime('%Y-%m-%d')})",
        "",
        f"{cpu_model()} (`lscpu`), {os.cpu_count()} CPUs shared with other work, load average "
        f"{load:.2f} before the run. `bench/llm_sim.py`. **Simulated** from a calibration on "
        "this machine; checked against the real loop in `llm_sim_vs_real.md`.",
        "",
        f"Calibration (demo LLM, fp32, 1 thread): prefill ~ {cost.prefill_a_ms:.3f} + "
        f"{cost.prefill_b_ms:.5f}*L + {cost.prefill_c_ms:.3e}*L^2 ms; decode step ms by batch "
        f"({steps}) at {cost.decode_ref_context} tokens of context each, "
        f"+ {cost.decode_slope_ms * 1e3:.3f} us per context token; KV "
        f"{cost.kv_bytes_per_token} bytes/token.",
        "",
        f"Workload: Poisson arrivals, {REQUESTS:,} requests per load, prompt {PROMPT} tokens "
        f"(uniform), {NEW} new tokens; 2 instances in every layout (colocated and chunked: "
        f"2 replicas; disaggregated: 1 prefill + 1 decode, KV link 10 Gbit/s); max 64 "
        f"sequences per instance; chunk 256 tokens. Goodput: TTFT <= {SLO_TTFT_MS:g} ms and "
        f"TPOT <= {SLO_TPOT_MS:g} ms. Times in ms.",
        "",
        "| load/s | layout | TTFT p50 | TTFT p99 | TPOT p50 | TPOT p99 | ITL p99 | ITL max "
        "| tokens/s | goodput/s | share |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for rate in RATES:
        work = workload(rate, REQUESTS)
        for name in LAYOUTS:
            layout = dataclasses.replace(BASE, name=name)
            r = summarize_llm(simulate_llm(work, layout, cost), SLO_TTFT_MS, SLO_TPOT_MS)
            t, p, i, g = r["ttft_ms"], r["tpot_ms"], r["itl_ms"], r["goodput"]
            lines.append(
                f"| {rate:g} | {layout.describe()} | {t['p50']:.1f} | {t['p99']:.1f} | "
                f"{p['p50']:.2f} | {p['p99']:.2f} | {i['p99']:.2f} | {i['max']:.1f} | "
                f"{r['throughput']['tokens_per_s']:,.0f} | {g['requests_per_s']:.2f} | "
                f"{g['share']:.0%} |"
            )
    lines += ["", "## Simulator speed", "",
              f"Poisson {RATES[1]:g}/s, the layouts above; issue 28's goal: 100,000 requests of "
              "512 prompt and 128 new tokens per layout in 2 s or less.", "",
              "| layout | prompt / new tokens | requests | wall s (simulate + summary) "
              "| requests/s |", "|---|---|---|---|---|"]  # fmt: skip
    schedule = make_schedule(parse_traffic(f"poisson:{RATES[1]:g}"), 0, 0,
                             requests=SPEED_REQUESTS)  # fmt: skip
    for lengths in (("512", "128"), (PROMPT, NEW)):  # issue 28's, then the table's
        work = make_workload(schedule, parse_length(lengths[0], "p"),
                             parse_length(lengths[1], "n"), 0)  # fmt: skip
        for name in LAYOUTS:
            layout = dataclasses.replace(BASE, name=name)
            t0 = time.perf_counter()
            summarize_llm(simulate_llm(work, layout, cost), SLO_TTFT_MS, SLO_TPOT_MS)
            wall = time.perf_counter() - t0
            rate = SPEED_REQUESTS / wall
            lines.append(f"| {layout.describe()} | {lengths[0]} / {lengths[1]} | "
                         f"{SPEED_REQUESTS:,} | {wall:.2f} | {rate:,.0f} |")  # fmt: skip
    lines += [
        "",
        "What the model leaves out: an iteration costs the prefill pass plus the decode step "
        "(two passes, as on this engine; a fused kernel would overlap them); times are the "
        "calibration's medians (no spread drawn); no preemption (a sequence reserves its "
        "prompt and output when admitted); KV transfers do not contend beyond one link per "
        "prefill instance; the first token of a disaggregated request is counted when its KV "
        "cache lands on the decode side.",
    ]
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
