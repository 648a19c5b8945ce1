"""`opscope simulate MODEL_FOLDER --llm`: LLM serving predicted in three layouts
(colocated, chunked prefill, disaggregated prefill/decode) from prefill and decode times
calibrated on the model; `--layout all` puts them side by side on the same requests."""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any, TextIO

from engine.backends.genai.model import read_config
from engine.backends.genai.weights import PRECISIONS as SERVED_PRECISIONS
from engine.cli.common import EXIT_OK, write_json
from engine.cli.printer import LivePrinter
from engine.config import RunConfig
from engine.errors import ConfigError
from engine.events import Notice, Progress, drive
from engine.run.llm_study_job import plan_json, record_llm_study
from engine.serve.llm.cal_fit import honesty_line
from engine.serve.llm.cal_plan import needs_from
from engine.serve.llm.cost import LLMCost
from engine.serve.llm.metrics import summarize_llm
from engine.serve.llm.prefix_cache import check_prefix_fits
from engine.serve.llm.requests import LLMWorkload
from engine.serve.llm.sim import Layout, simulate_llm
from engine.serve.llm.study import served_calibration
from engine.serve.llm.study_plan import (
    DEFAULT_NEW,
    KV_GBPS,
    LLMPlan,
    kv_ms_per_mb,
    plan_layouts,
    plan_workload,
)
from engine.serve.traffic.schedule import parse_traffic

DURATION_S = 60.0
NOT_FOR_LLM = ("find", "tune_batching", "curve", "confirm", "max_batch", "preferred",
               "delay_ms", "queue_limit", "timeout_ms", "cache", "slow_stretches")  # fmt: skip


def workload_json(args: argparse.Namespace, work: Any) -> dict[str, Any]:
    """The lengths served: as the flags say, or an LLM trace's own ('trace 91-1200')."""
    traced = getattr(args, "prompt_len", None) is None and _from_llm_trace(args)
    if traced and len(work):
        return {
            "prompt_len": f"trace {int(work.prompt.min())}-{int(work.prompt.max())}",
            "new_tokens": f"trace {int(work.output.min())}-{int(work.output.max())}",
        }
    return {
        "prompt_len": _default(args.prompt_len, "512"),
        "new_tokens": _default(args.new_tokens, "128"),
    }


def _from_llm_trace(args: argparse.Namespace) -> bool:
    spec = parse_traffic(args.traffic) if args.traffic else None
    if spec is None or spec.kind != "trace" or spec.path is None:
        return False
    from engine.serve.traffic.trace_formats import sniff

    return sniff(spec.path) in ("azure", "burstgpt", "mooncake")


def _default(value: Any, fallback: Any) -> Any:
    return fallback if value is None else value


def plan_from_args(args: argparse.Namespace) -> LLMPlan:
    """The study the flags ask for (the defaults of the plan where a flag is absent)."""
    if args.kv_gbps is not None and args.kv_transfer_ms_per_mb is not None:
        raise ConfigError("--kv-gbps and --kv-transfer-ms-per-mb say the same thing: give one")
    gbps = _default(args.kv_gbps, KV_GBPS)
    if not (gbps > 0 and math.isfinite(gbps)):
        raise ConfigError(f"--kv-gbps must be positive, got {gbps:g}")
    return LLMPlan(
        traffic=args.traffic,
        seed=_default(args.seed, 0),
        requests=args.requests,
        duration_s=_default(args.duration, DURATION_S),
        prompt_len=args.prompt_len,
        new_tokens=_default(args.new_tokens, DEFAULT_NEW),
        layout=str(_default(args.layout, "all")),
        instances=args.instances,
        chunk_tokens=_default(args.chunk_tokens, 256),
        prefill_tokens=args.prefill_tokens,
        max_seqs=_default(args.max_seqs, 64),
        kv_tokens=_default(args.kv_tokens, 0),
        prefill_instances=_default(args.prefill_instances, 1),
        decode_instances=_default(args.decode_instances, 1),
        kv_ms_per_mb=_default(args.kv_transfer_ms_per_mb, kv_ms_per_mb(gbps)),
        slo_ttft_ms=args.slo_ttft,
        slo_tpot_ms=args.slo_tpot,
        shared_prefix=getattr(args, "shared_prefix", None),
        prefix_block=getattr(args, "prefix_block", 16),
        prefix_cache=getattr(args, "prefix_cache", None) or 0,
    )


def layouts_from_args(args: argparse.Namespace, context_length: int) -> list[Layout]:
    return plan_layouts(plan_from_args(args), context_length)


def workload_from_args(args: argparse.Namespace, context_length: int) -> LLMWorkload:
    return plan_workload(plan_from_args(args), context_length)


def check_llm_args(args: argparse.Namespace, not_for_llm: tuple[str, ...], verb: str) -> None:
    """What `simulate --llm` and `load --llm` refuse alike: one line each."""
    refused = [f"--{k.replace('_', '-')}" for k in not_for_llm if getattr(args, k, None)]
    if refused:
        raise ConfigError(f"{', '.join(refused)}: not for generating models (--llm)")
    if args.traffic is None:
        raise ConfigError("--traffic SPEC is needed (e.g. poisson:5)")
    if args.precision not in SERVED_PRECISIONS:
        raise ConfigError(
            f"--precision {args.precision}: a generating model is {verb} in "
            f"{', '.join(SERVED_PRECISIONS)} (fp16 throughout; weight-only INT8/INT4)"
        )
    for flag in ("slo_ttft", "slo_tpot"):
        value = getattr(args, flag)
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise ConfigError(f"--{flag.replace('_', '-')} must be a positive number of ms")


def serving_config(args: argparse.Namespace) -> RunConfig:
    """The engine config `simulate --llm` and `load --llm` serve with (batch 1: serving
    batches sequences itself)."""
    return RunConfig(precision=args.precision, fusion=args.fusion, batch=1,
                     threads=args.threads, spinning=args.spinning == "on",
                     provider=args.provider)  # fmt: skip


def cmd_simulate_llm(args: argparse.Namespace) -> int:
    check_llm_args(args, NOT_FOR_LLM, "simulated")
    args.duration = _default(args.duration, DURATION_S)
    args.seed = _default(args.seed, 0)
    llm = read_config(args.model)
    layouts = layouts_from_args(args, llm.context_length)
    work = workload_from_args(args, llm.context_length)
    check_simulation_fits(len(work))
    if args.prefix_cache and work.blocks is None:
        raise ConfigError("--prefix-cache: the prompts share no prefix; give --shared-prefix "
                          "GROUPS,TOKENS, or a Mooncake trace (hash_ids)")  # fmt: skip
    if args.prefix_cache:  # before calibrating: KV rows of at least 2 bytes an element
        check_prefix_fits(args.prefix_cache, work.block_tokens, llm.shape.kv_bytes_per_token(2))
    config = serving_config(args)
    printer = LivePrinter()
    results = []
    try:
        needs = needs_from(work.prompt, layouts)
        calibrating = served_calibration(args.model, config, needs, args.recalibrate)
        try:
            _, cost = drive(calibrating, printer.feed)
        except KeyboardInterrupt as exc:  # what was measured is kept: say so, in one line
            for note in getattr(exc, "__notes__", []):
                printer.feed(Notice("warning", note))
            raise
        if args.prefix_cache:
            check_prefix_fits(args.prefix_cache, work.block_tokens, cost.kv_bytes_per_token)
        for layout in layouts:
            t0 = time.perf_counter()
            label = layout.describe()

            def progress(done: int, total: int, label: str = label) -> None:
                printer.feed(Progress("simulate", done, total, f"{label}, requests done"))

            blocks = args.prefix_cache or 0
            book = simulate_llm(work, layout, cost, progress, blocks)
            r = {"layout": layout.name, "layout_config": layout.to_json(), "simulated": True,
                 **summarize_llm(book, args.slo_ttft, args.slo_tpot)}  # fmt: skip
            if blocks:
                r.update(prefix_effect(work, layout, cost, blocks, args))
            r["simulator_s"] = time.perf_counter() - t0
            results.append(r)
    finally:
        printer.close()
    result: dict[str, Any] = {
        "model": {"path": args.model, "kind": llm.kind, "context_length": llm.context_length},
        "config": config.to_json(),
        "traffic": {
            **parse_traffic(args.traffic).to_json(),
            "seed": args.seed,
            "duration_s": args.duration,
            "requests": len(work),
        },
        "workload": workload_json(args, work),
        "simulated": True,
        "calibration": cost.to_json(),
    }
    if len(results) == 1:
        result.update(results[0])
    else:
        result["layout"] = "all"
        result["layouts"] = results
    out = sys.stdout if args.json != "-" else sys.stderr
    print_llm(result, results, cost, out)
    record_study(args, "simulate", config, results, out)
    if args.json:
        write_json(args.json, result)
    return EXIT_OK


# what simulating a request holds at the peak: its book (arrival, lengths, first and last
# token as Python lists), its share of the stretches booked, and the summary's arrays
# (910 bytes measured: 200,000 requests of an Azure-style trace against 20,000, every layout)
SIM_BYTES_PER_REQUEST = 1000


def check_simulation_fits(requests: int) -> None:
    """Refuse, in one line and before calibrating, a simulation that would hold more than
    the memory this machine has free (ten million requests take about 10 GB, and a trace
    may hold 50 million): it would run for hours and then be killed for memory. The
    layouts are simulated one after another: the peak is one layout's."""
    import psutil

    from engine.model.sizes import size_text

    need = requests * SIM_BYTES_PER_REQUEST
    free = psutil.virtual_memory().available
    if need > free:
        raise ConfigError(
            f"{requests:,} requests: simulating them takes about {size_text(need)}, "
            f"more than the {size_text(free)} of memory free; simulate a part of the "
            "traffic (--requests N, --duration S, --trace-start S)"
        )


def record_study(
    args: argparse.Namespace,
    kind: str,
    config: RunConfig,
    rows: list[dict[str, Any]],
    out: Any,
    partial: bool = False,
) -> None:
    """With --session: the study's rows recorded (a table of their own: session show,
    report and the session window list them)."""
    if not args.session:
        return
    plan = plan_json(plan_from_args(args))
    study = record_llm_study(args.session, args.model, kind, config, plan, rows, partial)
    out.write(f"recorded   {args.session} (LLM serving study {study}"
              f"{', partial' if partial else ''})\n")  # fmt: skip


CURVE = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0)  # cache sizes, as shares of the one asked for


def prefix_effect(
    work: LLMWorkload, layout: Layout, cost: LLMCost, blocks: int, args: argparse.Namespace
) -> dict[str, Any]:
    """The same requests without a prefix cache, and the hit rate and TTFT against the
    cache's size (CURVE x the size asked for)."""
    plain = summarize_llm(simulate_llm(work, layout, cost), args.slo_ttft, args.slo_tpot)
    curve = []
    for share in CURVE:
        size = max(1, round(blocks * share))
        r = summarize_llm(simulate_llm(work, layout, cost, None, size))
        curve.append({
            "blocks": size,
            "hit_rate": r["prefix_cache"]["hit_rate"],
            "ttft_p50_ms": r["ttft_ms"]["p50"],
            "ttft_p99_ms": r["ttft_ms"]["p99"],
        })  # fmt: skip
    return {
        "without_prefix_cache": {k: plain[k] for k in ("ttft_ms", "tpot_ms", "throughput")},
        "prefix_curve": curve,
    }


def _continuing_line(cost: LLMCost) -> str:
    """A chunked engine's passes' own fit (calibration 6: later chunks; 7: every chunk),
    or nothing."""
    if cost.continuing is None:
        return ""
    a, b, c, d = cost.continuing
    return (f"a chunk of k after d cached ~ {a:.3f} + {b * 1e3:.2f}e-3*k + "
            f"{c * 1e6:.3f}e-6*k*(d+k) + {d * 1e3:.3f}e-3*d ms; ")  # fmt: skip


def _cal_line(cost: LLMCost) -> str:
    steps = sorted(cost.decode_ms.items())
    lo, hi = steps[0], steps[-1]
    return (
        f"prefill ~ {cost.prefill_a_ms:.3f} + {cost.prefill_b_ms * 1e3:.2f}e-3*L + "
        f"{cost.prefill_c_ms * 1e6:.3f}e-6*L^2 ms; "
        + _continuing_line(cost)
        + f"decode step {lo[1]:.3f} ms ({lo[0]} seq) to "
        f"{hi[1]:.3f} ms ({hi[0]} seqs) + {cost.decode_slope_ms * 1e3:.3f} us per context token; "
        f"KV {cost.kv_bytes_per_token / 1024:.1f} KiB/token"
    )


def print_llm(
    r: dict[str, Any], rows: list[dict[str, Any]], cost: LLMCost | None, out: TextIO
) -> None:
    """The table of `simulate --llm`, and of `load --llm` (no calibration; labelled real)."""
    w = out.write
    t, wl = r["traffic"], r["workload"]
    w(f"model      {r['model']['path']} (context {r['model']['context_length']})\n")
    if cost is not None:
        w(f"calibrated {_cal_line(cost)}\n")
        trust = honesty_line(cost)
        if trust:
            w(f"           {trust}\n")
    kind = "simulated" if r["simulated"] else "real"
    w(f"traffic    {t['spec']}: {t['requests']} requests; prompt {wl['prompt_len']} tokens, "
      f"{wl['new_tokens']} new ({kind})\n")  # fmt: skip
    w(f"{'layout':<16}{'inst':>5} {'TTFT p50':>9}{'p90':>9}{'p99':>9} {'TPOT p50':>9}{'p90':>8}"
      f"{'p99':>8} {'ITL p99':>8}{'max':>9} {'tok/s':>9}{'req/s':>8} {'goodput/s':>10}"
      f"{'share':>7}\n")  # fmt: skip
    for row in rows:
        ttft, tpot, itl = row["ttft_ms"], row["tpot_ms"], row["itl_ms"]
        thr, good = row["throughput"], row["goodput"]
        goodput = f"{good['requests_per_s']:10.2f}{good['share']:7.0%}" if good else f"{'-':>10}"
        w(f"{row['layout_config']['label']:<16}{_insts(row):>5} {_cell(ttft['p50'], 9, 1)}"
          f"{_cell(ttft['p90'], 9, 1)}{_cell(ttft['p99'], 9, 1)} {_cell(tpot['p50'], 9, 2)}"
          f"{_cell(tpot['p90'], 8, 2)}{_cell(tpot['p99'], 8, 2)} {_cell(itl['p99'], 8, 2)}"
          f"{_cell(itl['max'], 9, 2)} {_cell(thr['tokens_per_s'], 9, 0)}"
          f"{_cell(thr['requests_per_s'], 8, 2)} {goodput}\n")  # fmt: skip
    w("           ms; TTFT from arrival, TPOT per request (last - first)/(n - 1), ITL every "
      "gap between two tokens\n")  # fmt: skip
    good = rows[0]["goodput"]
    if good is None:
        w("           goodput: give --slo-ttft MS and/or --slo-tpot MS\n")
    else:
        slos = [f"{k} <= {good[f'slo_{k}_ms']:g} ms" for k in ("ttft", "tpot")
                if good[f"slo_{k}_ms"] is not None]  # fmt: skip
        w(f"           goodput: requests per second meeting {' and '.join(slos)}\n")
    for row in rows:
        if "prefix_cache" in row:
            _print_prefix(row, w)


def _print_prefix(row: dict[str, Any], w: Any) -> None:
    """A layout's prefix cache: hit rate, TTFT with and without, hit rate against size."""
    pc, plain = row["prefix_cache"], row["without_prefix_cache"]["ttft_ms"]
    w(f"prefix     {row['layout_config']['label']}: {pc['blocks']:,} blocks per instance, "
      f"{pc['hit_rate']:.1%} of prompt tokens cached ({pc['requests_hit']} requests hit); "
      f"TTFT p50 {row['ttft_ms']['p50']:.1f} ms (without: {plain['p50']:.1f}), p99 "
      f"{row['ttft_ms']['p99']:.1f} ms (without: {plain['p99']:.1f})\n")  # fmt: skip
    if "prefix_curve" in row:
        w("           cache size against hit rate: " + ", ".join(
            f"{c['blocks']:,}: {c['hit_rate']:.0%} ({c['ttft_p50_ms']:.1f} ms)"
            for c in row["prefix_curve"]) + "  (blocks: hit rate (TTFT p50))\n")  # fmt: skip
    if "tokens_identical" in row:
        same = row["tokens_identical"]
        w(f"           tokens with and without the cache: {same['same']} of "
          f"{same['requests']} requests identical\n")  # fmt: skip


def _cell(value: float, width: int, decimals: int) -> str:
    """`value` right-aligned in `width` with at least one space before it: fewer decimals,
    then 3 significant digits, where the number is too wide (an overloaded run's TTFT)."""
    text = f"{value:.{decimals}f}"
    if len(text) >= width:
        text = f"{value:.0f}"
    if len(text) >= width:
        text = f"{value:.3g}"
    return " " + text.rjust(width - 1)


def _insts(row: dict[str, Any]) -> int:
    c = row["layout_config"]
    if c["name"] == "disaggregated":
        return int(c["prefill_instances"]) + int(c["decode_instances"])
    return int(c["instances"])
