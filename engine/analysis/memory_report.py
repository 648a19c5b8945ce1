"""The report's section on memory reports (`opscope memory --session`, the Memory dock):
per report, its weights by dtype, the activation peak as run and as loaded (the node and
the tensors alive there), what the session held against the estimate, and the load broken
down; the newest with a chart of the activation memory alive while each node ran.
Everything from the file was checked on reading (engine/session/memory_rows.py) and is
escaped here (engine/analysis/report_html.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.analysis.report_html import figure, num, section, table
from engine.analysis.report_plots import _svg, label
from engine.analysis.run_summary import inputs_text
from engine.model.sizes import device_copy_text, size_text
from engine.session.memory_rows import MemoryRow

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CHARTS = 3  # the newest reports get a chart; a chart costs a fraction of a second


def memory_section(rows: Sequence[MemoryRow]) -> str:
    """The whole "Memory" section ("" when the session holds no memory report)."""
    if not rows:
        return ""
    intro = (
        "<p>Weights by dtype of the variant run; the activation memory alive while each node "
        "ran (a tensor lives from the node that makes it to the last that reads it), as run "
        "(ONNX Runtime's optimized graph, in the order its profiler saw) and as loaded (the "
        "model file); resident memory of one session measured in a process of its own.</p>"
    )
    head = ["#", "model", "inputs", "config", "weights", "peak as run", "peak as loaded",
            "session holds", "estimate / held", "load"]  # fmt: skip
    if any(r.report.get("llm") for r in rows):  # a generating model's: its KV cache
        head.append("KV cache (batch 1)")
        intro += (
            "<p>For a generating model, the peak as run is its prefill's (the prompt in one "
            "pass) and the KV cache is counted apart: per token of one sequence, at the run's "
            "prompt + new tokens and at the model's full context.</p>"
        )
    body = table(head, [_row(r)[: len(head)] for r in rows], right={0, 4, 5, 6, 7, 8})
    charts = "".join(_chart(r) for r in rows[-CHARTS:] if _live(r) is not None)
    return section("memory", "Memory", intro + body + charts)


def _live(r: MemoryRow) -> dict[str, Any] | None:
    acts = r.report["activations"]
    live: dict[str, Any] | None = acts.get("as_run") or acts.get("as_loaded")
    return live


def _peak(live: dict[str, Any] | None) -> str:
    if not live:
        return "-"
    return f"{size_text(live['peak_bytes'])} at {live['at_node']}"


def _row(r: MemoryRow) -> list[object]:
    rep = r.report
    w = rep["weights_bytes"]
    dtypes = ", ".join(f"{k} {size_text(v)}" for k, v in list(w["by_dtype"].items())[:3])
    m, load = rep["measured"], rep["load"]
    ratio = m.get("estimate_over_measured")
    session = load.get("session_s")
    config = r.config.label() if r.config is not None else "-"
    return [
        r.id,
        (r.model_path or "-").rsplit("/", 1)[-1],
        inputs_text(rep["inputs"], most=4),  # the shapes the figures are for
        config,
        f"{size_text(w['total'])} ({dtypes})",
        _peak(rep["activations"].get("as_run")),
        _peak(rep["activations"].get("as_loaded")),
        size_text(m["held_bytes"]),
        "-" if ratio is None else f"{ratio:.0%}",
        f"read {num(load.get('read_s'), 3)} s, session {num(session, 3)} s"
        + (f"; {copied}" if (copied := device_copy_text(load.get("weights_to_device"))) else ""),
        _kv(rep.get("llm")),
    ]


def _kv(llm: dict[str, Any] | None) -> str:
    """A generating model's KV cache for one sequence: per token, at the run's length and
    at full context ("-" for another model)."""
    if not llm:
        return "-"
    kv = llm["kv_cache"]
    one = next((r for r in kv["by_batch"] if r["batch"] == 1), None)
    if one is None:
        return "-"
    return (
        f"{size_text(one['per_token'])}/token; {size_text(one['per_sequence'])} at "
        f"{kv['run_tokens']:,} tokens; {size_text(one['full_context'])} at "
        f"{llm['context_length']:,} (full context)"
    )


def _chart(r: MemoryRow) -> str:
    live = _live(r)
    if not live or not live["timeline"]:
        return ""
    alive = ", ".join(f"{t['tensor']} {size_text(t['bytes'])}" for t in live["alive_at_peak"][:5])
    svg = _svg(_timeline, r, width=9.0, height=3.0, key=f"memory-{r.id}")
    shapes = inputs_text(r.report["inputs"], most=4)
    return figure(
        svg, f"Report {r.id} (inputs {shapes}): activations alive per node; at the peak: {alive}"
    )


def _timeline(fig: Figure, r: MemoryRow) -> None:
    ax = fig.add_subplot()
    acts = r.report["activations"]
    for name, live, style in (("as run", acts.get("as_run"), "-"),
                              ("as loaded", acts.get("as_loaded"), "--")):  # fmt: skip
        if not live or not live["timeline"]:
            continue
        y = np.array([p["bytes"] for p in live["timeline"]], dtype=np.float64) / 1e6
        ax.plot(np.arange(y.size), y, style, linewidth=1.2, label=label(name))
    ax.set_xlabel("node, in executed order")
    ax.set_ylabel("activations alive (MB)")
    ax.legend(loc="upper right", fontsize=8)
