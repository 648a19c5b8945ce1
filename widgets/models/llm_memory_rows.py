"""What the Memory dock says of a generating model's memory report (engine/run/llm_memory.py's
"llm" section), as short lines: the KV cache per token, at the run's length and at full
context for each batch, and the prefill's and decode step's activation peaks and resident
growth. Qt-free, so the wording is tested without a window; a report with no "llm" section
(an ONNX model's) has no lines."""

from __future__ import annotations

from typing import Any

from engine.api import size_text


def llm_lines(report: dict[str, Any] | None) -> list[str]:
    llm = (report or {}).get("llm")
    if not llm:
        return []
    kv = llm["kv_cache"]
    layout = (
        f" ({kv['layers']} layers x {kv['kv_heads']} KV heads x {kv['head_size']}, K and V)"
        if "layers" in kv
        else ""
    )
    run, context = f"{kv['run_tokens']:,}", f"{llm['context_length']:,}"
    lines = [
        f"KV cache {kv['dtype']}: {int(kv['bytes_per_token']):,} bytes per token{layout}; "
        f"a sequence of {llm['prompt_len']} prompt + {llm['new_tokens']} new = {run} tokens"
    ]
    for row in kv["by_batch"]:
        lines.append(
            f"  batch {row['batch']}: {size_text(row['per_token'])}/token, "
            f"{size_text(row['per_sequence'])} at {run} tokens, "
            f"{size_text(row['full_context'])} at full context ({context})"
        )
    for name, p in llm["phases"].items():
        peak = p.get("activation_peak_bytes")
        at = f" at {p['at_node']}" if p.get("at_node") else ""
        acts = f"activations {size_text(peak)}{at}" if peak else "activations ?"
        grew = p.get("rss_growth_bytes")
        rss = "" if grew is None else f", resident +{size_text(max(grew, 0))}"
        tokens = f"{p['tokens']:,} token{'s' if p['tokens'] != 1 else ''}"
        batch = f" x batch {p['batch']}" if p.get("batch") else ""
        lines.append(f"{name.capitalize()} ({tokens}{batch}): {acts}{rss}")
    return lines
