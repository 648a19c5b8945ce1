"""The report's section on generation runs (kind `generate`): per run its shape, TTFT and
TPOT percentiles with their counts, both over the run's time, the prefill/decode split of
a generation, tokens/s and the KV cache; the profiled phases when `--profile` was given,
and the agreement with FP32 for a weight-only INT8/INT4 model.

Figures come from engine/analysis/generation_figures.py and are drawn by
generation_plots.py; everything from the file is escaped (engine/analysis/report_html.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from engine.analysis import generation_plots
from engine.analysis.export import generation_runs
from engine.analysis.generation_figures import GenerationFigures, generation_figures
from engine.analysis.report_html import byte_size, esc, figure, num, pct, section, table
from engine.measure.stats import LatencyStats
from engine.session.generation_rows import GenerationRun
from engine.session.reader import SessionReader
from engine.session.rows import RunRow


def generation_section(reader: SessionReader, runs: Sequence[RunRow]) -> str:
    """The whole "Generation" section ("" when the session holds no generation run)."""
    found = generation_runs(reader, runs)
    if not found:
        return ""
    intro = (
        "<p>Runs of <code>opscope generate</code>: each timed generation reads a prompt "
        "(the prefill, whose time with the first token's choice is the <b>time to first "
        "token</b>, TTFT), then makes one token per decode step (<b>time per output "
        "token</b>, TPOT). Percentiles come from the raw passes, n of each. The run's "
        "latency in the other sections is a whole generation, end to end.</p>"
    )
    return section("generation", "Generation", intro + "".join(_run_block(r, g) for r, g in found))


def _run_block(run: RunRow, g: GenerationRun) -> str:
    f = generation_figures(g)
    config = run.config.short_label() if run.config else "?"
    parts = [
        f"<h3>Run {run.id}: {esc(run.model_name or '?')}, {esc(config)}</h3>",
        f'<p class="small">prompt {g.prompt_len} tokens, {g.new_tokens} new, batch '
        f"{g.batch}, {esc(g.sampling)}; context {g.context_length} tokens; "
        f"{f.ttft.count} timed generations.</p>",
        table(
            ("", "n", "p50 ms", "p90 ms", "p99 ms", "mean ms", "max ms"),
            [_pct_row("TTFT", f.ttft), _pct_row("TPOT", f.tpot)],
            right={1, 2, 3, 4, 5, 6},
        ),
        table(("figures", ""), _figure_rows(f), right={1}),
    ]
    if f.ttft.count:
        parts.append(
            figure(
                generation_plots.timeline_svg(g),
                f"Run {run.id}: each generation's TTFT at its start, and each decode step's "
                "TPOT at its start (p50 and p99 per time bin when there are many).",
            )
        )
        parts.append(
            figure(
                generation_plots.split_svg(f),
                f"Run {run.id}: a mean generation, prefill (mean TTFT) against the sum of "
                f"its {g.new_tokens - 1} decode steps (mean over generations).",
            )
        )
    if f.phases:
        parts.append(_phases_block(run.id, f))
    if f.accuracy is not None:
        a = f.accuracy
        parts.append(
            table(
                ("against FP32", ""),
                [
                    (
                        "next token the same",
                        f"{pct(a.token_agreement)} of {a.positions or '?'} positions",
                    ),
                    (
                        "logit cosine mean / min",
                        f"{num(a.cosine_mean, 5)} / {num(a.cosine_min, 5)}",
                    ),
                    ("method", a.method or "-"),
                ],
                right={1},
            )
        )
    return "".join(parts)


def _pct_row(name: str, s: LatencyStats) -> tuple[str, ...]:
    return (name, str(s.count), num(s.p50), num(s.p90), num(s.p99), num(s.mean), num(s.max))


def _figure_rows(f: GenerationFigures) -> list[tuple[str, str]]:
    total = f.mean_ttft_ms + (f.mean_decode_ms if math.isfinite(f.mean_decode_ms) else 0.0)
    rows = [
        ("prefill / decode of a generation",
         f"{num(f.mean_ttft_ms)} ms / {num(f.mean_decode_ms)} ms "
         f"({pct(f.mean_ttft_ms / total if total > 0 else None)} prefill)"),
        ("tokens/s prefill", f"{num(f.prefill_tokens_per_s, 0)} (batch x prompt / TTFT p50)"),
        ("tokens/s decode", f"{num(f.decode_tokens_per_s, 1)} (batch / TPOT p50)"),
        ("tokens/s end to end", f"{num(f.tokens_per_s, 1)} (new tokens / mean generation)"),
        ("KV cache", f"{byte_size(f.kv_bytes)} at the full length"),
    ]  # fmt: skip
    if f.kv_buffer_bytes is not None:
        rows.append(("KV cache allocated", byte_size(f.kv_buffer_bytes)))
    return rows


def _phases_block(run_id: int, f: GenerationFigures) -> str:
    head = ("phase", "passes", "ms per pass", "GFLOP", "MB", "FLOP/byte", "GFLOP/s",
            "top op types")  # fmt: skip
    rows = [
        (
            p.name,
            "-" if p.passes is None else str(p.passes),
            num(p.time_ms),
            num(p.gflop, 4),
            num(p.mbytes, 2),
            num(p.intensity, 2),
            num(p.gflops_per_s, 1),
            ", ".join(f"{name} {pct(share)}" for name, share in p.top_op_types) or "-",
        )
        for p in f.phases
    ]
    return (
        '<p class="small">Profiled apart after the timing (a separate profiling session: '
        "time per pass with the profiler's overhead). Decode reads every weight and the "
        "KV cache for one token per sequence, so its intensity is far lower than "
        "prefill's.</p>"
        + table(head, rows, right={1, 2, 3, 4, 5, 6})
        + figure(
            generation_plots.phases_svg(run_id, f.phases),
            f"Run {run_id}: each phase at its arithmetic intensity and achieved GFLOP/s "
            "(log-log). The session holds no measurement of the machine's peaks, so no "
            "roofs are drawn: a compute-heavy phase sits up and to the right, a "
            "memory-bound one down and to the left.",
        )
    )
