"""The `load` and `simulate` command lines: traffic, batching and cache flags."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from engine.cli.arg_types import (
    MAX_INSTANCES,
    MAX_REQUESTS,
    float_in,
    int_in,
    milliseconds,
    nonneg_seconds,
    positive_ms,
    seconds,
    share,
)
from engine.cli.common import add_json_flag, add_seed_flag, add_session_flag
from engine.cli.remote_cmd import add_host_flag

MAX_SERVE_BATCH = 4096  # --max-batch (BatchPolicy's bound)
MAX_SEQS = 65_536  # --max-seqs: sequences running at once per instance
MAX_TOKENS = 1 << 24  # token counts: chunk, prefill budget, KV cache

CONFIRM_S = 10.0  # seconds of real traffic that a bare --confirm serves (after --warmup-s)

SubParsers = Any  # argparse's private _SubParsersAction


def add_serving_parsers(
    sub: SubParsers, add_knobs: Callable[[argparse.ArgumentParser], None]
) -> None:
    p = sub.add_parser(
        "load",
        help="serve a model under open-loop traffic: dynamic batching, a response cache, "
        "end-to-end latency from each request's scheduled time",
    )
    p.add_argument("model", help="an .onnx file (or a PyTorch file)")
    add_knobs(p)
    _add_serving(p)
    p.add_argument(
        "--duration", type=seconds, default=10.0, metavar="S",
        help="seconds of traffic (default 10)",
    )  # fmt: skip
    p.add_argument(
        "--requests", type=int_in(1, MAX_REQUESTS), metavar="N", help="serve the first N requests"
    )
    p.add_argument(
        "--slo-p99", type=positive_ms, metavar="MS",
        help="the p99 target (ms): goodput counts the requests served within it",
    )  # fmt: skip
    add_session_flag(
        p,
        "record the run (end-to-end latency of every request after the warm-up) into "
        "a session file: session show, compare and report read it like any run",
    )
    add_host_flag(p)
    _add_llm(p, real=True)
    p.set_defaults(handler=_cmd_load)

    p = sub.add_parser(
        "simulate",
        help="predict serving under traffic with a discrete-event simulator calibrated "
        "on the real engine; find the max rate under an SLO, tune batching",
    )
    p.add_argument(
        "model",
        help="an .onnx file (or a PyTorch file), calibrated first; or FILE.opscope[:ID], a "
        "recorded load or simulate run to simulate again (its traffic, batching and cache, "
        "any flag given overriding them); or a generating model's genai-format folder "
        "(LLM serving, below)",
    )
    add_knobs(p)
    _add_serving(p)
    p.add_argument(
        "--duration", type=seconds, default=None, metavar="S",
        help="seconds of simulated traffic (default 60, or the recorded run's; --requests "
        "overrides)",
    )  # fmt: skip
    p.add_argument(
        "--requests",
        type=int_in(1, MAX_REQUESTS),
        metavar="N",
        help="simulate the first N requests",
    )
    p.add_argument(
        "--find", choices=("max-rate",),
        help="max-rate: the largest rate (this traffic's shape, scaled) whose p99 meets "
        "--slo-p99",
    )  # fmt: skip
    p.add_argument(
        "--tune-batching", action="store_true",
        help="search max batch x queue delay x instances for the most capacity under "
        "--slo-p99",
    )  # fmt: skip
    p.add_argument(
        "--slo-p99", type=positive_ms, metavar="MS",
        help="the p99 target (ms): --find and --tune-batching meet it; goodput counts the "
        "requests within it",
    )  # fmt: skip
    p.add_argument(
        "--confirm", type=seconds, nargs="?", const=CONFIRM_S, default=None,
        metavar="SECONDS",
        help="with --find: serve the found rate on the real engine for SECONDS (default "
        f"{CONFIRM_S:g}) and show measured against predicted, and whether it met the SLO",
    )  # fmt: skip
    p.add_argument(
        "--curve", action="store_true",
        help="a capacity curve: offered rate against p50, p99 and throughput, knee marked",
    )  # fmt: skip
    p.add_argument("--recalibrate", action="store_true", help="measure the batch times again")
    p.add_argument(
        "--slow-stretches", action="store_true",
        help="draw service times from the calibrated slow-stretch process (slow batches "
        "come in runs, as measured) rather than one by one (bench/results/serve_twin.md)",
    )  # fmt: skip
    add_session_flag(
        p,
        "record the simulated run (kind simulate: its predicted end-to-end latencies) "
        "into a session file, to compare with a real load run",
    )
    add_host_flag(p)
    _add_llm(p)
    p.set_defaults(handler=_cmd_simulate)


def _add_serving(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("traffic, batching and cache")
    g.add_argument(
        "--traffic", metavar="SPEC",
        help="poisson:RATE | constant:RATE | bursts:BASE,PEAK,PERIOD_S,DUTY | ramp:FROM,TO "
        "| trace:FILE (CSV of times, Azure LLM, BurstGPT or Mooncake JSONL) | closed:N",
    )  # fmt: skip
    g.add_argument(
        "--trace-speed", type=float_in(0.0, 10_000.0, lo_open=True, name="speed"), metavar="X",
        help="trace:FILE replayed X times faster (default 1)",
    )  # fmt: skip
    g.add_argument(
        "--trace-start", type=nonneg_seconds, metavar="S",
        help="trace:FILE replayed from S seconds into it (default 0); --duration is the "
        "window's length",
    )  # fmt: skip
    g.add_argument("--max-batch", type=int_in(1, MAX_SERVE_BATCH), metavar="N", help="default 1")
    g.add_argument("--preferred", metavar="4,8", help="preferred batch sizes (comma-separated)")
    g.add_argument(
        "--delay-ms", type=milliseconds, metavar="D",
        help="max queue delay before a partial batch is sent (default 0)",
    )  # fmt: skip
    g.add_argument(
        "--queue-limit", type=int_in(0, MAX_REQUESTS), metavar="Q",
        help="reject requests beyond Q queued (default 0: no limit)",
    )  # fmt: skip
    g.add_argument(
        "--timeout-ms", type=milliseconds, metavar="T",
        help="drop a request that waited longer (default 0: never)",
    )  # fmt: skip
    g.add_argument(
        "--instances", type=int_in(1, MAX_INSTANCES), metavar="K",
        help="model instances serving concurrently (default 1)",
    )  # fmt: skip
    g.add_argument(
        "--cache", type=int_in(0, MAX_REQUESTS), metavar="N",
        help="response cache entries (LRU; default 0: off)",
    )  # fmt: skip
    g.add_argument(
        "--repeat", type=share, metavar="R",
        help="share of requests that repeat an earlier one, Zipf-popular (default 0)",
    )  # fmt: skip
    g.add_argument(
        "--closed-requests", type=int_in(1, MAX_REQUESTS), default=2000, metavar="N",
        help="closed:N traffic: requests in all (default 2000)",
    )  # fmt: skip
    g.add_argument(
        "--warmup-s", type=nonneg_seconds, metavar="S",
        help="requests due in the first S seconds are served and counted but kept out of "
        "the latency figures (default 1)",
    )  # fmt: skip
    add_seed_flag(g, "seed for traffic and inputs (default 0)", default=None)
    add_json_flag(g)


LLM_FLAGS = ("layout", "prompt_len", "new_tokens", "chunk_tokens", "max_seqs", "kv_tokens",
             "prefill_tokens", "prefill_instances", "decode_instances", "kv_gbps",
             "kv_transfer_ms_per_mb", "slo_ttft", "slo_tpot")  # fmt: skip


def _add_llm(p: argparse.ArgumentParser, real: bool = False) -> None:
    """Generating models: continuous batching in three layouts (the counts are checked by
    the command, so a bad one is one line); `load` serves the first two for real."""
    g = p.add_argument_group(
        "generating models (LLMs): given --llm or a genai-format folder as MODEL"
    )
    g.add_argument(
        "--llm", action="store_true",
        help="serve the LLM for real: one engine, iteration-level (continuous) batching, the "
        "same requests simulate --llm draws from these flags" if real else
        "simulate LLM serving: prefill and decode steps calibrated on the model, "
        "iteration-level (continuous) batching",
    )  # fmt: skip
    g.add_argument(
        "--layout", metavar="NAME",
        help="colocated | chunked | disaggregated (default colocated)" if real else
        "colocated | chunked | disaggregated | all (the three side by side; default all)",
    )  # fmt: skip
    g.add_argument(
        "--prompt-len", metavar="L",
        help="prompt tokens: L, LO-HI (uniform) or lognormal:MEDIAN,SIGMA[,MAX] (default 512; "
        "a trace's size column when it has one)",
    )  # fmt: skip
    g.add_argument(
        "--new-tokens", metavar="N",
        help="output tokens: N, LO-HI or lognormal:MEDIAN,SIGMA[,MAX] (default 128)",
    )  # fmt: skip
    g.add_argument("--chunk-tokens", type=int_in(1, MAX_TOKENS), metavar="C",
                   help="chunked: prompt tokens per iteration (default 256)")  # fmt: skip
    g.add_argument("--max-seqs", type=int_in(1, MAX_SEQS), metavar="S",
                   help="sequences running at once per instance (default 64)")  # fmt: skip
    g.add_argument(
        "--kv-tokens", type=int_in(1, MAX_TOKENS), metavar="T",
        help="KV cache tokens per instance; a sequence reserves its prompt and output when "
        "admitted (default: enough for --max-seqs of the longest)",
    )  # fmt: skip
    g.add_argument(
        "--prefill-tokens", type=int_in(1, MAX_TOKENS), metavar="T",
        help="colocated and prefill instances: the most prompt tokens per prefill pass "
        "(whole prompts; default the model's context length)",
    )  # fmt: skip
    g.add_argument("--prefill-instances", type=int_in(1, MAX_INSTANCES), metavar="P",
                   help="disaggregated: prefill instances (default 1)")  # fmt: skip
    g.add_argument("--decode-instances", type=int_in(1, MAX_INSTANCES), metavar="D",
                   help="disaggregated: decode instances (default 1)")  # fmt: skip
    g.add_argument(
        "--kv-gbps", type=float_in(0.0, 1e6, lo_open=True), metavar="G",
        help="disaggregated: the link moving each prompt's KV cache, gigabits/s (default 10; "
        "one link per prefill instance, transfers in turn)",
    )  # fmt: skip
    g.add_argument("--kv-transfer-ms-per-mb", type=float_in(0.0, 1e6), metavar="X",
                   help="disaggregated: KV transfer time per MB instead of --kv-gbps")  # fmt: skip
    g.add_argument(
        "--slo-ttft", type=positive_ms, metavar="MS", help="goodput: time to first token"
    )
    g.add_argument(
        "--slo-tpot", type=positive_ms, metavar="MS", help="goodput: time per output token"
    )
    g.add_argument(
        "--prefix-cache", type=int_in(1, 1 << 26), metavar="BLOCKS",
        help="each prefilling instance keeps a prefix cache of BLOCKS KV blocks (LRU): "
        "prompts that begin alike skip their cached blocks; reported with and without ("
        + ("served twice, tokens compared" if real else "and hit rate against cache size")
        + ")",
    )  # fmt: skip
    g.add_argument(
        "--shared-prefix", metavar="GROUPS,TOKENS",
        help="every prompt begins with one of GROUPS shared prefixes of TOKENS tokens (part "
        "of its length); a Mooncake trace brings its own (hash_ids)",
    )  # fmt: skip
    g.add_argument(
        "--prefix-block", type=int_in(1, 4096), default=16, metavar="TOKENS",
        help="tokens per prefix-cache block (default 16, as vLLM; Mooncake traces: 512)",
    )  # fmt: skip


def _cmd_load(args: argparse.Namespace) -> int:
    if args.host:
        from engine.cli.remote_cmd import cmd_remote

        return cmd_remote(args)
    from engine.backends.genai.model import genai_folder

    if args.llm or genai_folder(args.model) is not None:
        from engine.cli.load_llm import cmd_load_llm

        return cmd_load_llm(args)
    _no_llm_flags(args)
    from engine.cli.serve_cmds import cmd_load

    return cmd_load(args)


def _no_llm_flags(args: argparse.Namespace) -> None:
    given = [f"--{k.replace('_', '-')}" for k in LLM_FLAGS if getattr(args, k) is not None]
    if given:
        from engine.errors import ConfigError

        raise ConfigError(f"{', '.join(given)}: for generating models (add --llm)")


def _cmd_simulate(args: argparse.Namespace) -> int:
    if args.host:
        from engine.cli.remote_cmd import cmd_remote

        return cmd_remote(args)
    from engine.backends.genai.model import genai_folder

    if args.llm or genai_folder(args.model) is not None:
        from engine.cli.simulate_llm import cmd_simulate_llm

        return cmd_simulate_llm(args)
    _no_llm_flags(args)
    from engine.cli.simulate_cmd import cmd_simulate

    return cmd_simulate(args)
