"""`opscope load MODEL_FOLDER --llm`: the generating model served for real under open-loop
traffic (continuous batching, colocated or chunked prefill), the same requests that
`simulate --llm` draws from the same flags, printed in the same table, labelled real."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np

from engine.backends.genai.model import open_llm, read_config
from engine.cli.common import EXIT_FAULT, EXIT_INTERRUPTED, EXIT_OK, write_json
from engine.cli.printer import LivePrinter
from engine.cli.simulate_llm import (
    NOT_FOR_LLM,
    check_llm_args,
    layouts_from_args,
    print_llm,
    record_study,
    serving_config,
    workload_from_args,
    workload_json,
)
from engine.errors import ConfigError
from engine.events import drive
from engine.serve.llm.metrics import summarize_llm
from engine.serve.llm.prefix_cache import check_prefix_fits
from engine.serve.llm.real_loop import LLMServingLoop, check_real_layout
from engine.serve.llm.study import served_folder
from engine.serve.loop import drain_deadline
from engine.serve.traffic.schedule import parse_traffic

NOT_FOR_REAL = (*NOT_FOR_LLM, "warmup_s", "repeat")


def compared(
    plain: LLMServingLoop, cached: LLMServingLoop, args: argparse.Namespace
) -> dict[str, Any]:
    """The run without the prefix cache beside the run with it: its TTFT and TPOT, and
    whether every request got the same tokens."""
    n = len(plain.book.arrival)
    same = sum(plain.tokens(rid) == cached.tokens(rid) for rid in range(n))
    base = summarize_llm(plain.book, args.slo_ttft, args.slo_tpot)
    return {
        "without_prefix_cache": {k: base[k] for k in ("ttft_ms", "tpot_ms", "throughput")},
        "tokens_identical": {"requests": n, "same": int(same)},
    }


DISAGGREGATED_ONLY = ("prefill_instances", "decode_instances", "kv_gbps", "kv_transfer_ms_per_mb")


def cmd_load_llm(args: argparse.Namespace) -> int:
    check_llm_args(args, NOT_FOR_REAL, "served")
    layout_name = str(args.layout or "colocated").lower()
    given = [f"--{k.replace('_', '-')}" for k in DISAGGREGATED_ONLY if getattr(args, k) is not None]
    if given and layout_name != "disaggregated":
        raise ConfigError(f"{', '.join(given)}: for --layout disaggregated")
    if layout_name == "all":
        raise ConfigError("--layout all: the real loop serves one layout per run")
    args.layout = layout_name
    args.instances = args.instances or 1
    args.seed = 0 if args.seed is None else args.seed
    llm_config = read_config(args.model)
    layout = layouts_from_args(args, llm_config.context_length)[0]
    check_real_layout(layout)
    work, cut = workload_from_args(args, llm_config.context_length).within(
        args.duration, f"traffic {args.traffic}"
    )  # real time: nothing waits past --duration
    if cut:
        print(f"info: {cut}", file=sys.stderr)
    blocks = args.prefix_cache or 0
    if blocks and work.blocks is None:
        raise ConfigError("--prefix-cache: the prompts share no prefix; give --shared-prefix "
                          "GROUPS,TOKENS, or a Mooncake trace (hash_ids)")  # fmt: skip
    if blocks:
        check_prefix_fits(blocks, work.block_tokens, llm_config.shape.kv_bytes_per_token(2))
    config = serving_config(args)
    printer = LivePrinter()
    plain = None
    try:
        folder = drive(served_folder(args.model, config), printer.feed)
        llm = open_llm(folder, config)
        deadline = drain_deadline(work.arrivals)
        if blocks:  # the same requests without the cache first: TTFT and tokens compared
            plain = LLMServingLoop(llm, work, layout, seed=args.seed, deadline_s=deadline)
            drive(plain.run(), printer.feed)
        loop = LLMServingLoop(llm, work, layout, seed=args.seed, deadline_s=deadline,
                              prefix_blocks=blocks)  # fmt: skip
        if plain is None or not plain.interrupted:
            drive(loop.run(), printer.feed)
    finally:
        printer.close()
    row = {"layout": layout.name, "layout_config": layout.to_json(), "simulated": False,
           **summarize_llm(loop.book, args.slo_ttft, args.slo_tpot)}  # fmt: skip
    if plain is not None:
        row.update(compared(plain, loop, args))
    iterations = [it for engine in loop.engines for it in engine.iterations]
    result: dict[str, Any] = {
        "model": {
            "path": args.model,
            "kind": llm_config.kind,
            "context_length": llm_config.context_length,
        },
        "config": config.to_json(),
        "provider": llm.provider_used,
        "traffic": {
            **parse_traffic(args.traffic).to_json(),
            "seed": args.seed,
            "duration_s": args.duration,
            "requests": len(work),
        },
        "workload": workload_json(args, work),
        "simulated": False,
        **row,
        "engine": {
            "iterations": len(iterations),
            "slot_moves": sum(engine.moves for engine in loop.engines),
            "engines": len(loop.engines),
            "unfinished": loop.unfinished(),
        },
    }
    stopped = loop.interrupted or (plain is not None and plain.interrupted)
    row["unfinished"] = len(work) - int(np.isfinite(loop.book.done).sum())
    out = sys.stdout if args.json != "-" else sys.stderr
    print_llm(result, [row], None, out)
    record_study(args, "real", config, [row], out, partial=stopped or row["unfinished"] > 0)
    if args.json:
        write_json(args.json, result)
    if stopped:  # its figures, then
        print("opscope: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    if loop.timed_out and row["unfinished"]:  # a backlog it could not serve
        unsent = int((~np.isfinite(loop.sent)).sum())
        print(f"dropped    {row['unfinished']:,} of {len(work):,} requests unfinished at the "
              f"drain deadline ({unsent:,} never sent): not served, not in the figures; "
              "the study is recorded partial", file=out)  # fmt: skip
        print(f"opscope: stopped at the drain deadline: {row['unfinished']:,} request(s) "
              "not served", file=sys.stderr)  # fmt: skip
        return EXIT_FAULT
    return EXIT_OK
