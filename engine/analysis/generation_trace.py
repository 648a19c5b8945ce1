"""A generation run (kind `generate`) as Chrome trace events: each timed generation as one
slice, with its prefill ("prefill": the time to first token) and each decode step
("decode 1", "decode 2", ...) as child slices, all on one track.

Times (ts, dur) are µs from the run's timing origin; the store keeps each generation's
start and the duration of each pass, and the passes ran back to back from that start. pid
is the run id, like the other runs' tracks (engine/analysis/export.py). A big run keeps
its first generations up to MAX_SLICES slices, and the cut is said in `otherData`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.analysis.run_summary import summarize
from engine.session.generation_rows import GenerationRun
from engine.session.rows import RunRow

MAX_SLICES = 400_000  # generation, prefill and decode slices together, per run
TID = 1


@dataclass(frozen=True)
class GenerationTrace:
    events: list[dict[str, Any]]
    notes: list[str]  # what was cut, one line each


def generation_trace_events(run: RunRow, g: GenerationRun) -> GenerationTrace:
    """The run's track: process and thread names, then per timed generation its slice,
    its prefill and its decode steps (children nest by time, on the same thread)."""
    pid = run.id
    label = (
        f"{summarize(run).label} [generate: prompt {g.prompt_len}, {g.new_tokens} new, "
        f"batch {g.batch}]"
    )
    events: list[dict[str, Any]] = [
        _meta("process_name", pid, {"name": label}),
        _meta("process_sort_index", pid, {"sort_index": run.id}),
        _meta("thread_name", pid, {"name": "generations"}),
    ]
    notes: list[str] = []
    steps = g.decode_steps()
    budget = MAX_SLICES
    for i, (start, ttft, decode) in enumerate(
        zip(g.starts_ns.tolist(), g.ttft_ns.tolist(), steps, strict=True)
    ):
        if 2 + decode.size > budget:
            notes.append(
                f"run {run.id}: {g.starts_ns.size} timed generations; the trace keeps the "
                f"first {i} ({MAX_SLICES} slices at most)"
            )
            break
        budget -= 2 + decode.size
        durs = decode.tolist()
        total = ttft + sum(durs)
        events.append(_slice(pid, f"generation {i}", "generation", start, total,
                             {"generation": i, "decode_steps": len(durs)}))  # fmt: skip
        events.append(_slice(pid, "prefill", "prefill", start, ttft, {"generation": i}))
        at = start + ttft
        for k, dur in enumerate(durs, 1):
            events.append(_slice(pid, f"decode {k}", "decode", at, dur,
                                 {"generation": i, "step": k}))  # fmt: skip
            at += dur
    return GenerationTrace(events, notes)


def _slice(pid: int, name: str, cat: str, start_ns: int, dur_ns: int,
           args: dict[str, Any]) -> dict[str, Any]:  # fmt: skip
    """A complete ("X") event; ns in, µs out (to the ns)."""
    return {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": TID,
            "ts": start_ns / 1e3, "dur": dur_ns / 1e3, "args": args}  # fmt: skip


def _meta(name: str, pid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": TID, "ts": 0, "args": args}
