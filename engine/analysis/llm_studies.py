"""Recorded LLM serving studies in words, for `opscope session show` and the report: one
line naming the study (model, kind, traffic, lengths, prefix cache), and per layout its
TTFT and TPOT, throughput, goodput and what the prefix cache did. The rows were checked on
reading (engine/session/llm_study_rows.py); a figure not known reads "-". The report
escapes every cell (engine/analysis/report_html.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from engine.analysis.report_html import esc, section, table
from engine.session.llm_study_rows import LLMStudyRow

HEAD = ("layout", "run", "requests", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99",
        "tokens/s", "goodput/s", "prefix cache")  # fmt: skip


def _ms(x: Any) -> str:
    return f"{x:.1f} ms" if isinstance(x, int | float) and math.isfinite(x) else "-"


def _num(x: Any, digits: int = 1) -> str:
    return f"{x:,.{digits}f}" if isinstance(x, int | float) and math.isfinite(x) else "-"


def layout_name(row: dict[str, Any]) -> str:
    """'colocated ×2', 'chunked 256 ×1', 'disagg 1P+1D' (as the LLM Serving dock)."""
    c = row["layout_config"]
    label = str(c.get("label", row["layout"]))
    if row["layout"] == "disaggregated":
        return label
    return f"{label} ×{c.get('instances', '?')}"


def prefix_text(row: dict[str, Any]) -> str:
    """'63% hit; TTFT p50 14.8 ms, 45.3 ms without; tokens same 43/43' or '-'."""
    pc = row.get("prefix_cache")
    if not pc or "hit_rate" not in pc:
        return "-"
    blocks = pc.get("blocks")
    parts = [f"{pc['hit_rate']:.0%} hit" + (f" of {blocks:,} blocks" if blocks else "")]
    without = (row.get("without_prefix_cache") or {}).get("ttft_ms", {}).get("p50")
    if without is not None:
        parts.append(f"TTFT p50 {_ms(row['ttft_ms'].get('p50'))}, {_ms(without)} without")
    same = row.get("tokens_identical")
    if same and "requests" in same and "same" in same:
        parts.append(f"tokens identical {same['same']}/{same['requests']}")
    return "; ".join(parts)


def row_cells(row: dict[str, Any]) -> list[str]:
    good = row.get("goodput") or {}
    rate = _num(good.get("requests_per_s"), 2)
    if "share" in good:
        rate += f" ({good['share']:.0%})"
    unfinished = row.get("unfinished")
    requests = f"{row['requests']['count']:,}"
    if unfinished:
        requests += f" ({unfinished:,} unfinished)"
    return [
        layout_name(row),
        "sim" if row["simulated"] else "real",
        requests,
        _ms(row["ttft_ms"].get("p50")),
        _ms(row["ttft_ms"].get("p99")),
        _ms(row["tpot_ms"].get("p50")),
        _ms(row["tpot_ms"].get("p99")),
        _num(row["throughput"].get("tokens_per_s"), 0),
        rate if good else "-",
        prefix_text(row),
    ]


def study_title(s: LLMStudyRow) -> str:
    """'study 2: tiny-llm, real (partial), poisson:4, prompt 64, 16 new tokens, SLOs 200/50 ms'."""
    p = s.plan
    name = (s.model_path or "-").replace("\\", "/").rsplit("/", 1)[-1]
    what = "simulated, every layout" if s.kind == "simulate" else "served for real"
    parts = [f"{name}, {what}{' (partial)' if s.status == 'partial' else ''}"]
    if "traffic" in p:
        parts.append(str(p["traffic"]))
    parts.append(f"prompt {p.get('prompt_len') or 'as traced'}, {p.get('new_tokens', '?')} new")
    if p.get("shared_prefix"):
        parts.append(f"shared prefix {p['shared_prefix']}")
    slos = [f"{k.upper()} {p[f'slo_{k}_ms']:g} ms" for k in ("ttft", "tpot") if f"slo_{k}_ms" in p]
    if slos:
        parts.append("SLO " + ", ".join(slos))
    if s.config is not None:
        parts.append(s.config.precision)
    return f"study {s.id}: " + ", ".join(parts)


def llm_section(studies: Sequence[LLMStudyRow]) -> str:
    """The report's "LLM serving" section ("" when the session holds no study)."""
    if not studies:
        return ""
    intro = (
        "<p>LLM serving studies: every layout simulated from the model's calibration, or one "
        "layout served for real beside the simulator's answer for the same requests. TTFT "
        "is arrival to first token, TPOT the time per output token after the first; goodput "
        "counts the requests that met every SLO given. With a prefix cache, the same "
        "requests without it are shown beside.</p>"
    )
    body = "".join(
        f"<h3>{esc(study_title(s))}</h3>"
        + table(HEAD, [row_cells(r) for r in s.rows], right={2, 3, 4, 5, 6, 7, 8})
        for s in studies
    )
    return section("llm", "LLM serving", intro + body)
