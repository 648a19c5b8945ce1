"""`opscope generate`: time a generating model and print TTFT, TPOT, tokens/s and the
KV cache."""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from engine.backends.genai.generate import Sampling
from engine.backends.genai.phases import Phase
from engine.cli.common import EXIT_INTERRUPTED, EXIT_OK, workload_of, write_json
from engine.cli.printer import LivePrinter
from engine.config import PRECISION_LABELS, RunConfig
from engine.errors import ConfigError
from engine.events import Notice, Progress, VariantReady, drive
from engine.measure.stats import LatencyStats
from engine.run.generation import GenerateReport, GenerateRequest, run_generate
from engine.run.jobs import run_job
from engine.session.recording import recording
from engine.tune.prompt_sweep import PromptPoint, PromptSweep, PromptSweepRequest, check_lengths


def cmd_generate(args: argparse.Namespace) -> int:
    config = RunConfig(
        precision=args.precision,
        fusion=args.fusion,
        batch=args.batch,
        threads=args.threads,
        spinning=args.spinning == "on",
        provider=args.provider,
        min_cosine=args.min_cosine,
        min_token_agreement=args.token_agreement,
    )
    req = GenerateRequest(
        workload_of(args, config),
        prompt_len=args.prompt_len,
        prompt_text=args.prompt,
        prompts_file=args.prompts,
        new_tokens=args.new_tokens,
        batch=args.batch,
        duration_s=args.duration,
        warmup=args.warmup,
        sampling=Sampling(temperature=max(0.0, args.temperature), seed=args.seed),
        seed=args.seed,
        profile=args.profile,
    )
    printer = LivePrinter()
    out = sys.stdout if args.json != "-" else sys.stderr

    lengths = _lengths(args.sweep_prompt) if args.sweep_prompt else None
    weights: dict[str, Any] | None = None  # the weight search's, from the VariantReady
    try:
        with recording(args.session, model_path=args.model, kind="generate") as record:

            def show(item: object) -> None:
                nonlocal weights
                if isinstance(item, Progress | Notice):
                    printer.feed(item)
                else:
                    if isinstance(item, VariantReady):
                        weights = item.details.get("weights")
                    record(item)  # type: ignore[arg-type]

            report: GenerateReport = drive(run_generate(req), show)
        _print(report, out)
        if weights:
            _print_weights(weights, out)
        swept = None
        if lengths and not report.interrupted:

            def point(item: object) -> None:
                if isinstance(item, PromptPoint):
                    out.write(
                        f"sweep      prompt {item.prompt_len:>5}: TTFT p50 {item.ttft_p50_ms:9.3f} "
                        f"ms, TPOT p50 {item.tpot_p50_ms:7.3f} ms (n={item.generations})\n"
                    )
                    out.flush()
                elif isinstance(item, Progress | Notice):
                    printer.feed(item)

            # the same job as the window's Scaling dock: each length's run recorded
            sweep = PromptSweepRequest(req, tuple(lengths), args.session)
            swept = drive(run_job(sweep), point)
            _print_sweep(swept, out)
    finally:
        printer.close()
    if args.json:
        data = report.to_json()
        data["sweep"] = swept.to_json() if swept is not None else None
        data["weights"] = weights  # the weight search (None: fp32, fp16)
        write_json(args.json, data)
    if report.interrupted:  # its figures above, then the news (the run: cancelled)
        print("opscope: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK


def _print_weights(w: dict[str, Any], out: TextIO) -> None:
    """The weight search: what it chose, then each build's figures."""
    cached = " (the choice cached)" if w.get("cached") else ""
    out.write(f"weights    {w.get('summary', '')}{cached}\n")
    for i, a in enumerate(w.get("attempts") or []):
        s = a.get("settings") or {}
        kept = [f"{len(s[k])} MatMul(s) in {k.split('_')[0].upper()}"
                for k in ("int8_nodes", "fp32_nodes") if s.get(k)]  # fmt: skip
        what = ", ".join([f"INT{s.get('bits')} blocks of {s.get('block_size')}",
                          f"accuracy level {s.get('accuracy_level')}", *kept])  # fmt: skip
        ppl = a.get("perplexity")
        mark = "*" if i == w.get("chosen") else " "
        out.write(
            f"         {mark} {what}: {a['token_agreement']:.1%} token agreement, logit cosine "
            f"min {a['cosine_min']:.4f}, {a['bytes'] / 1e6:.1f} MB"
            + (f", perplexity {ppl:.3f}" if isinstance(ppl, int | float) else "")
            + "\n"
        )


def _lengths(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError as exc:
        raise ConfigError(
            f"--sweep-prompt: whole numbers separated by commas, got {text!r}"
        ) from exc
    return check_lengths(values)


def _print_sweep(s: PromptSweep, out: TextIO) -> None:
    longest = s.points[-1].prompt_len
    out.write(
        f"prefill    {s.fit_text()}: the quadratic "
        f"term is {s.quadratic_share:.0%} of TTFT at {longest} tokens\n"
        f"decode     TPOT grows {s.tpot_per_context_token_us:.3f} us per token of context "
        f"(from {s.tpot_base_ms:.3f} ms)\n"
    )


def _pcts(s: LatencyStats) -> str:
    return f"p50 {s.p50:8.3f} ms  p90 {s.p90:8.3f}  p99 {s.p99:8.3f}  (n={s.count})"


def _phase_line(p: Phase, out: TextIO) -> None:
    secs = p.time_ms / 1e3
    total = sum(s.time_ms for s in p.op_types) or 1.0
    top = ", ".join(f"{s.name} {s.time_ms / total:.0%}" for s in p.op_types[:3])
    out.write(
        f"{'phase':<10} {p.name:<8} {p.time_ms:8.3f} ms/pass (profiled, n={p.passes}); "
        f"{p.flops / 1e9:.3f} GFLOP, {p.bytes / 1e6:.1f} MB, intensity {p.intensity:.2f} "
        f"FLOP/B, {p.flops / secs / 1e9:.1f} GFLOP/s, {p.bytes / secs / 1e9:.1f} GB/s; {top}\n"
    )


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB"


def _print(r: GenerateReport, out: TextIO) -> None:
    c = r.config
    out.write(f"model      {r.model}\n")
    out.write(
        f"config     {PRECISION_LABELS[c.precision]} fusion={c.fusion} "
        f"threads={c.threads or 'default'} batch={r.batch}; prompt {r.prompt_len} tokens, "
        f"{r.new_tokens} new; {r.generations} generations after the warm-up"
        + (" (interrupted: the figures of those done; accuracy and profile skipped)"
           if r.interrupted else "")
        + "\n"
    )  # fmt: skip
    out.write(f"provider   {r.provider_used}\n")
    out.write(f"ttft       {_pcts(r.ttft)}\n")
    out.write(f"tpot       {_pcts(r.tpot)}\n")
    out.write(f"e2e        {_pcts(r.e2e)}\n")
    out.write(
        f"tokens/s   prefill {r.prefill_tokens_per_s:,.0f}, decode {r.decode_tokens_per_s:,.1f} "
        f"(batch {r.batch}, from the p50s)\n"
    )
    out.write(
        f"kv cache   {r.kv_bytes_per_token / 1024:.1f} KiB per token per sequence; "
        f"{_mib(r.kv_bytes)} at {r.prompt_len + r.new_tokens} tokens x {r.batch}; "
        f"buffer {_mib(r.kv_buffer_bytes)}\n"
    )
    out.write(f"memory     peak RSS {_mib(r.peak_rss_bytes)}\n")
    if r.contention is not None:
        out.write(f"machine    {r.contention.line()}\n")
    if r.phases:
        for phase in r.phases.values():
            _phase_line(phase, out)
        pre, dec = r.phases["prefill"].intensity, r.phases["decode"].intensity
        if dec > 0:
            out.write(
                f"           decode's arithmetic intensity is {pre / dec:.0f}x lower than "
                "prefill's: decode reads weights and cache for each token (memory-bound)\n"
            )
    if r.accuracy is not None:
        a = r.accuracy
        out.write(
            f"accuracy   vs FP32: next token the same at {a.token_agreement:.1%} of {a.positions} "
            f"positions; logit cosine mean {a.cosine_mean:.5f}, min {a.cosine_min:.5f} "
            "(teacher-forced)\n"
        )
        if a.verdict is not None:
            out.write(f"verdict    {a.verdict.line()}\n")
        if a.perplexity_text():
            out.write(f"perplexity {a.perplexity_text().removeprefix('perplexity ')}\n")
        if a.data:
            out.write(f"data       {a.data}\n")
    if r.text is not None:
        sample = " ".join(r.text[0].split())[:160]
        out.write(f"output     {sample!r}\n")
