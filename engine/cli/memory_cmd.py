"""`opscope memory MODEL`: where one inference's memory goes (weights by dtype, the
activation peak and the tensors alive at it, as loaded and as run), what a session really
holds (resident memory, measured in a process of its own) and where load time goes."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from engine.cli.arg_types import int_in
from engine.cli.common import (
    EXIT_OK,
    add_json_flag,
    add_seed_flag,
    add_session_flag,
    workload_of,
    write_json,
)
from engine.cli.generate_args import MAX_TOKENS
from engine.cli.remote_cmd import add_host_flag
from engine.errors import escape_controls as safe  # one escaping for every printer
from engine.model.sizes import device_copy_text, size_text


def add_memory_parser(sub: Any, add_knobs: Any) -> None:
    p = sub.add_parser(
        "memory",
        help="where one inference's memory goes (weights, activation peak, who holds it), "
        "what a session holds, and where load time goes",
    )
    p.add_argument(
        "model", help="an .onnx file, or a generating model's folder (genai_config.json)"
    )
    add_knobs(p)
    p.add_argument(
        "--runs", type=int_in(1, 10_000), default=10, metavar="N",
        help="inferences after the first, for the steady-state resident memory (default 10)",
    )  # fmt: skip
    p.add_argument(
        "--prompt-len", type=int_in(1, MAX_TOKENS), metavar="L",
        help="a generating model (or a decoder ONNX with past_key_values inputs): the prompt's "
        "tokens, prefilled from an empty cache (default: --shape input_ids=BxL's, else 128)",
    )  # fmt: skip
    p.add_argument(
        "--new-tokens", type=int_in(1, MAX_TOKENS), metavar="N",
        help="a generating model: tokens generated after the prompt, for the KV cache per "
        "sequence (default 32)",
    )  # fmt: skip
    add_seed_flag(p, "seed for generated inputs")
    add_host_flag(p)
    add_json_flag(p, "the memory report")
    add_session_flag(p, "record the report into a session file (created, or appended to)")
    p.set_defaults(handler=_cmd_memory)


def _cmd_memory(args: argparse.Namespace) -> int:
    if args.host:
        from engine.cli.remote_cmd import cmd_remote

        return cmd_remote(args)
    from engine.cli.printer import run_printed
    from engine.run.memory_job import MemoryRequest

    req = MemoryRequest(workload_of(args), seed=args.seed, runs=args.runs,
                        session=args.session, prompt_len=args.prompt_len,
                        new_tokens=args.new_tokens)  # fmt: skip
    report: dict[str, Any] = run_printed(req)
    out = sys.stdout if args.json != "-" else sys.stderr
    print_memory(report, out)
    if args.session:
        print(f"recorded   {safe(args.session)} (memory report)", file=out)
    if args.json:
        write_json(args.json, {"memory": report})
    return EXIT_OK


def _variant_text(r: dict[str, Any]) -> str:
    load = r["load"]
    if (r.get("config") or {}).get("precision") == "fp32":
        return "no variant (the model file as is)"
    if load["variant_cached"]:
        return f"variant cached (built earlier in {load['variant_s']:.2f} s)"
    return f"variant built in {load['variant_s']:.2f} s"


def print_memory(r: dict[str, Any], out: TextIO) -> None:
    w = out.write
    weights = r["weights_bytes"]
    dtypes = ", ".join(f"{k} {size_text(v)}" for k, v in weights["by_dtype"].items())
    w(f"weights    {size_text(weights['total'])} ({dtypes})")
    loaded_total = sum(weights["as_loaded"].values())
    if abs(loaded_total - weights["total"]) > 1:
        w(f"; the model file's: {size_text(loaded_total)}")
    w("\n")
    llm = r.get("llm")
    if llm:
        print_llm(llm, w)
    acts = r["activations"] if not llm else {}
    for label, live in (("as loaded", acts.get("as_loaded")), ("as run", acts.get("as_run"))):
        if not live:
            continue
        unknown = live["unknown_tensors"]  # then the peak is a floor, not a wrong total
        peak = size_text(live["peak_bytes"]) + (" or more" if unknown else "")
        left_out = (
            f" ({unknown} tensor(s) not sized at these shapes, not counted)" if unknown else ""
        )
        w(f"activations {label}: peak {peak} at {safe(str(live['at_node']))}{left_out}\n")
        for t in live["alive_at_peak"][:5]:
            w(
                f"             {size_text(t['bytes']):>10}  {safe(str(t['tensor']))} "
                f"(from {safe(str(t['producer']))})\n"
            )
    m = r["measured"]
    rss = m["rss_bytes"]
    stages = " -> ".join(f"{k.replace('_', ' ')} {size_text(v)}" for k, v in rss.items())
    w(f"measured   resident memory: {stages}\n")
    ratio = m["estimate_over_measured"]
    what = "weights + the run's KV cache + activation peak" if llm else "weights + activation peak"
    w(f"           the session holds {size_text(m['held_bytes'])}; {what} "
      f"estimate {size_text(m['estimate_bytes'])}"
      + (f" ({ratio:.0%} of it: the rest is the runtime's own: arenas, thread pools, "
         "pre-packed weights, code)" if ratio is not None and ratio < 0.9 else
         f" ({ratio:.0%} of it)" if ratio is not None else "") + "\n")  # fmt: skip
    device = m.get("device")
    if device and device.get("bytes"):
        got = device["bytes"]
        stages = " -> ".join(f"{k.replace('_', ' ')} {size_text(v)}" for k, v in got.items())
        whose = (
            "this process on the GPU"
            if device.get("scope") == "process"
            else "the GPU's used memory (all processes)"
        )
        w(f"device     {whose}: {stages}\n")
    load = r["load"]
    parts = [f"read and parse {load['read_s']:.3f} s",
             _variant_text(r),
             f"session {load['session_s']:.3f} s"]  # fmt: skip
    inner = [f"{k} {load[k + '_s']:.3f} s" for k in ("model_loading", "session_initialization")
             if load.get(k + "_s") is not None]  # fmt: skip
    w(f"load       {', '.join(parts)}" + (f" (of which {', '.join(inner)})" if inner else "")
      + f"; provider {safe(str(r.get('provider_used')))}\n")  # fmt: skip
    copied = device_copy_text(load.get("weights_to_device"))
    if copied:
        w(f"           {copied}\n")


def print_llm(llm: dict[str, Any], w: Any) -> None:
    """A generating model's KV cache (per token, per sequence, full context, per batch) and
    its prefill's and decode step's activation peaks and resident growth."""
    kv = llm["kv_cache"]
    item = int(kv["bytes_per_token"]) // max(
        2 * kv.get("layers", 1) * kv.get("kv_heads", 1) * kv.get("head_size", 1), 1
    )
    layout = (
        f" = {kv['layers']} layers x {kv['kv_heads']} KV heads x {kv['head_size']} x 2 (K, V) "
        f"x {item} bytes" if "layers" in kv else ""
    )  # fmt: skip
    run, context = f"{kv['run_tokens']:,}", f"{llm['context_length']:,}"
    w(f"kv cache   {kv['dtype']}: {kv['bytes_per_token']:,} bytes per token{layout}; a "
      f"sequence of {llm['prompt_len']} prompt + {llm['new_tokens']} new = {run} tokens, "
      f"full context {context}\n")  # fmt: skip
    for row in kv["by_batch"]:
        w(f"           batch {row['batch']}: {size_text(row['per_token'])} per token, "
          f"{size_text(row['per_sequence'])} at {run} tokens, "
          f"{size_text(row['full_context'])} at full context ({context})\n")  # fmt: skip
    for name, p in llm["phases"].items():  # (a session's copy keeps fewer fields)
        tokens = f"{p['tokens']:,} token{'s' if p['tokens'] != 1 else ''}" + (
            f" x batch {p['batch']}" if p.get("batch") else "")  # fmt: skip
        peak = p.get("activation_peak_bytes")
        at = f" at {safe(str(p['at_node']))}" if p.get("at_node") else ""
        acts = f"activation peak {size_text(peak)}{at}" if peak else "activation peak unknown"
        grew = p.get("rss_growth_bytes")
        top = p.get("rss_peak_growth_bytes")
        rss = "" if grew is None else f"; resident +{size_text(max(grew, 0))}" + (
            f" (peak +{size_text(max(top, 0))})" if top is not None else "")  # fmt: skip
        w(f"{safe(name):<10} {tokens}: {acts}{rss}\n")
    if llm.get("measured_by"):
        w(f"           ({safe(str(llm['measured_by']))})\n")
