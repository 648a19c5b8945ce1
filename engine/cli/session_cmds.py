"""`opscope session show FILE[:RUN]`: list a session's runs, then its sweeps, memory
reports and LLM serving studies. `opscope session compact IN OUT`: a compact copy to hand
on."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from typing import TextIO

from engine.analysis import run_table
from engine.analysis.llm_studies import row_cells, study_title
from engine.analysis.run_summary import machine_text, summarize, with_recorded_stats
from engine.cli.common import EXIT_OK, write_json
from engine.measure.stats import latency_stats
from engine.model.sizes import size_text
from engine.session import RunRow, SweepRow, resolve_run_ref
from engine.session.generation_rows import GenerationRun
from engine.session.llm_study_rows import LLMStudyRow
from engine.session.memory_rows import MemoryRow
from engine.session.reader import SessionReader
from engine.session.trust import printable

MAX_CELL = 40
TOP_GROWTH = 3  # op types shown per sweep


def cmd_session_show(args: argparse.Namespace) -> int:
    path, run_id = resolve_run_ref(args.ref)
    with SessionReader.open(path) as reader:
        meta = reader.meta()
        machines = reader.machines()
        runs = reader.runs() if run_id is None else [reader.run(run_id)]
        # a run still recording (or killed) has samples but no summary: from its samples
        runs = [
            with_recorded_stats(r, reader.latency(r.id)[1]) if r.latency is None and r.samples
            else r
            for r in runs
        ]  # fmt: skip
        sweeps = reader.sweeps() if run_id is None else []
        memory = reader.memory() if run_id is None else []
        studies = reader.llm_studies() if run_id is None else []
        made = [g for r in runs if (g := reader.generation(r.id)) is not None]
    out = sys.stdout if args.json != "-" else sys.stderr
    print_session(path, meta, runs, out, machines)
    print_generations(made, out)
    print_sweeps(sweeps, out)
    print_memory_reports(memory, out)
    print_llm_studies(studies, out)
    if args.json:
        data = {"meta": meta, "machines": machines, "runs": [r.to_json() for r in runs]}
        if run_id is None:
            data["sweeps"] = [s.to_json() for s in sweeps]
            data["memory"] = [{"id": m.id, "created_at": m.created_at,
                               "model_path": m.model_path, **m.report} for m in memory]  # fmt: skip
            data["llm_studies"] = [
                {"id": s.id, "created_at": s.created_at, "model_path": s.model_path,
                 "kind": s.kind, "status": s.status,
                 "config": s.config.to_json() if s.config else None, "plan": s.plan,
                 "rows": s.rows}
                for s in studies
            ]  # fmt: skip
        write_json(args.json, data)
    return EXIT_OK


def cmd_session_compact(args: argparse.Namespace) -> int:
    from engine.session.compact_copy import compact_copy

    done = compact_copy(args.src, args.dest, args.keep_passes)
    dropped = (
        f", {done.op_rows_dropped:,} older op rows dropped" if args.keep_passes is not None else ""
    )
    print(
        f"wrote {printable(args.dest)}: {done.copy_bytes / 1e6:.1f} MB "
        f"(from {done.source_bytes / 1e6:.1f} MB{dropped})"
    )
    return EXIT_OK


def print_session(
    path: str,
    meta: dict[str, str | None],
    runs: Sequence[RunRow],
    out: TextIO,
    machines: dict[str, dict[str, str]] | None = None,
) -> None:
    """A header line about the file (and a line per other machine its runs ran on), then
    one line per run. Every text that came from the file goes through `printable`, so it
    cannot drive the terminal."""
    machine = ", ".join(printable(v) for v in (meta.get("cpu"), meta.get("gpu")) if v)
    out.write(
        f"session {printable(path)}: {len(runs)} run{'s' if len(runs) != 1 else ''}, "
        f"format v{printable(meta.get('schema_version') or '?')}, created "
        f"{_time(meta.get('created_at'))} on {printable(meta.get('host') or '?')}"
        + (f" ({machine})" if machine else "")
        + "\n"
    )
    for name, facts in (machines or {}).items():
        out.write(f"engine host {printable(name)}: {printable(machine_text(facts))}\n")
    if not runs:
        return
    header = tuple(c.name for c in run_table.BRIEF)
    rows = [header, *(_cells(r) for r in runs)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    numeric = {i for i, c in enumerate(run_table.BRIEF) if c.numeric}
    for row in rows:
        cells = [
            c.rjust(w) if i in numeric else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.write("  ".join(cells).rstrip() + "\n")


def print_generations(runs: Sequence[GenerationRun], out: TextIO) -> None:
    """One line per generation run: its shape, TTFT and TPOT from the raw samples."""
    for g in runs:
        ttft, tpot = latency_stats(g.ttft_ns), latency_stats(g.tpot_ns)
        out.write(
            f"run {g.run_id} generation: prompt {g.prompt_len}, {g.new_tokens} new, batch "
            f"{g.batch}, {printable(g.sampling)}: TTFT p50 {ttft.p50:.3f} ms p99 {ttft.p99:.3f} "
            f"(n={ttft.count}), TPOT p50 {tpot.p50:.3f} ms p99 {tpot.p99:.3f} (n={tpot.count})\n"
        )


def print_sweeps(sweeps: Sequence[SweepRow], out: TextIO) -> None:
    """One line per sweep: id, dim, sizes, status, the total's k and the op types that
    grow fastest (time ~ size^k)."""
    if not sweeps:
        return
    out.write(f"{len(sweeps)} sweep{'s' if len(sweeps) != 1 else ''}:\n")
    header = ("sweep", "dim", "values", "status", "total k", "fastest-growing op types (k)")
    rows = [header, *(_sweep_cells(s) for s in sweeps)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        cells = [
            c.rjust(w) if i in (0, 4) else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        out.write("  ".join(cells).rstrip() + "\n")


def print_memory_reports(reports: Sequence[MemoryRow], out: TextIO) -> None:
    """One line per memory report: id, model, weights, the activation peak as run (as
    loaded when unknown) and what the session held."""
    if not reports:
        return
    out.write(f"{len(reports)} memory report{'s' if len(reports) != 1 else ''}:\n")
    for m in reports:
        acts = m.report["activations"]
        live = acts.get("as_run") or acts.get("as_loaded")
        peak = (f"peak {size_text(live['peak_bytes'])} at "
                f"{_clip(printable(live['at_node']), MAX_CELL)}" if live else "peak -")  # fmt: skip
        name = _clip(printable((m.model_path or "-").rsplit("/", 1)[-1]), MAX_CELL)
        out.write(
            f"  {m.id}  {name}  weights {size_text(m.report['weights_bytes']['total'])}  {peak}"
            f"  session held {size_text(m.report['measured']['held_bytes'])}\n"
        )


def print_llm_studies(studies: Sequence[LLMStudyRow], out: TextIO) -> None:
    """Each LLM serving study: a line naming it, then a line per layout."""
    if not studies:
        return
    out.write(f"{len(studies)} LLM serving stud{'ies' if len(studies) != 1 else 'y'}:\n")
    for s in studies:
        out.write(f"  {printable(study_title(s))}\n")
        for row in s.rows:
            c = row_cells(row)
            out.write(f"    {_clip(printable(c[0]), MAX_CELL)}  {c[1]}  {c[2]} requests  TTFT "
                      f"p50 {c[3]} p99 {c[4]}  TPOT p50 {c[5]} p99 {c[6]}  {c[7]} tokens/s"
                      f"{'  goodput/s ' + c[8] if c[8] != '-' else ''}"
                      f"{'  prefix ' + printable(c[9]) if c[9] != '-' else ''}\n")  # fmt: skip


def _sweep_cells(s: SweepRow) -> tuple[str, ...]:
    top = ", ".join(
        f"{_clip(printable(name), MAX_CELL)} {_k(k)}" for name, k in s.ranked_growth()[:TOP_GROWTH]
    )
    return (
        str(s.id),
        _clip(printable(s.dim), MAX_CELL),
        _clip(printable(",".join(str(v) for v in s.values)), MAX_CELL),
        f"partial ({len(s.points)} points)" if s.status == "partial" else s.status,
        _k(s.growth_total),
        top or "-",
    )


def _k(k: float) -> str:
    return f"{k:.2f}" if math.isfinite(k) else "n/a"


def _cells(r: RunRow) -> tuple[str, ...]:
    """The brief columns, each text made printable; long texts from the file clipped (the
    file's own error text is clipped; the status and OpScope's note stay whole)."""
    s = summarize(r)
    clip = {"model": MAX_CELL, "inputs": MAX_CELL, "provider": MAX_CELL, "from": MAX_CELL}
    clip["status"] = 3 * MAX_CELL + len(r.status) + 2
    return tuple(
        _clip(printable(text), clip[c.name]) if c.name in clip else printable(text)
        for c, text in zip(run_table.BRIEF, run_table.cells(s), strict=True)
    )


def _time(iso: str | None) -> str:
    """'2026-05-09T07:35:25.123Z' -> '2026-05-09 07:35:25' (UTC, as stored)."""
    if not iso:
        return "-"
    return printable(iso[:19].replace("T", " "))


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
