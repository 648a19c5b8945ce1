"""`opscope gate BASELINE MODEL`: run the candidate K times, each as its own `opscope bench`
process (so the spread between processes is in the data), record the runs into a session,
and gate each metric with the hierarchical bootstrap of `engine.analysis.gate_stats`.

Exit codes: 0 no regression beyond the threshold; 3 a regression; 4 inconclusive (a side was
measured on a busy machine and the candidate reads slower, or the baseline was busy); 2 bad
input (the baseline,
the model, a mismatched config, a failed candidate run); 130 interrupted (the child stopped,
the runs recorded so far kept).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from engine.analysis.gate_report import (
    GateReport,
    inconclusive_line,
    junit_xml,
    markdown_summary,
    pct_text,
    runs_text,
    value_text,
    verdict,
)
from engine.analysis.gate_stats import gate_metric
from engine.analysis.likeness import busy
from engine.analysis.run_compare import side_of
from engine.analysis.run_sets import (
    RunSet,
    baseline_runs,
    read_run_set,
    setup_difference,
    setup_facts,
)
from engine.analysis.run_summary import summarize
from engine.cli.common import (
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    EXIT_REGRESSION,
    config_from_args,
    workload_of,
    write_json,
)
from engine.config import RunConfig
from engine.errors import ModelError, OpScopeError, one_line
from engine.files import write_atomic
from engine.measure.contention import combine
from engine.model.workload import JobInputs
from engine.run.child_job import describe_exit
from engine.run.isolated import run_isolated
from engine.run.timing import TimingPlan
from engine.session.origins import gate_origin, new_tune_key
from engine.session.reader import SessionReader
from engine.session.trust import printable
from engine.tune.trial import TrialRequest, trial_job

STOP_WAIT_S = 15.0  # a child asked to stop has this long to record its run as cancelled


class GateError(OpScopeError):
    """The gate cannot decide: a candidate run failed, or the sides do not match."""


def cmd_gate(args: argparse.Namespace) -> int:
    if not Path(args.model).is_file():
        raise ModelError("no such file", args.model)
    config = config_from_args(args)
    metrics = tuple(dict.fromkeys(args.metric or ["p50"]))
    base = baseline_runs(args.baseline, Path(args.model).name, config, planned_inputs(args, config))
    session = session_path(args)
    if not session.parent.is_dir():  # before K runs, not after the first
        raise GateError(f"folder {session.parent} does not exist", session)
    if session.exists():
        if session.resolve() == Path(base.path).resolve():
            raise GateError("--session must not be the baseline's file", session)
        SessionReader.open(session).close()  # a file we can append to, or exit 2 now
    out = sys.stdout if args.json != "-" else sys.stderr
    out.write(f"baseline   {printable(base.ref)}  ({len(base.runs)} runs)\n")
    t0 = time.perf_counter()
    ids = record_candidates(args, config, session, out)
    wall = time.perf_counter() - t0
    with SessionReader.open(session) as reader:
        cand = read_run_set(reader, [reader.run(i) for i in ids])
    diff = setup_difference(setup_facts(base.runs[0]), setup_facts(cand.runs[0]))
    if diff:
        raise GateError(f"the candidate's runs differ from the baseline's in {diff}", session)
    results = tuple(
        gate_metric(
            m,
            base.samples,
            cand.samples,
            threshold_pct=args.max_regression,
            confidence=args.confidence,
            seed=args.seed,
        )
        for m in metrics
    )
    report = GateReport(
        model=Path(args.model).name,
        config=summarize(cand.runs[0]).config,
        baseline_ref=base.ref,
        candidate_ref=cand.ref,
        results=results,
        wall_s=wall,
        notes=tuple(side_notes(base, cand)),
        **set_load(base, cand),
    )
    print_report(report, out)
    if args.junit:
        write_text(args.junit, junit_xml(report))
    if args.summary:
        write_text(args.summary, markdown_summary(report))
    if args.json:
        write_json(args.json, report.to_json())
    return {"regression": EXIT_REGRESSION, "inconclusive": EXIT_INCONCLUSIVE}.get(
        report.status, EXIT_OK
    )


def set_load(base: RunSet, cand: RunSet) -> dict[str, Any]:
    """Each side's runs' contention combined, as the report's `busy` lines."""
    loads = [combine(r.contention for r in s.runs if r.contention) for s in (base, cand)]
    sides = [side_of(s.runs[0], load) for s, load in zip((base, cand), loads, strict=True)]
    return {
        "busy": tuple(busy(sides[0], sides[1])),
        "baseline_busy": bool(loads[0] and loads[0].busy),
    }


def planned_inputs(
    args: argparse.Namespace, config: RunConfig
) -> dict[str, tuple[int, ...]] | None:
    """The input shapes the candidate will run at, read from the model without running it
    (its --shape and --dim applied), or None where data files decide them (--inputs) or the
    model cannot tell: the baseline's runs are then matched on the config alone."""
    if getattr(args, "inputs", None):
        return None
    from engine import backends
    from engine.model.inputs import plan_inputs

    given = JobInputs.from_args(args)
    try:
        _, info = backends.describe_model(args.model)
        return dict(plan_inputs(info, config.batch, given.shapes, given.dims).shapes)
    except OpScopeError:
        return None


def session_path(args: argparse.Namespace) -> Path:
    """--session; else beside --junit when it is a file (report.xml -> report.opscope);
    else a new file in the temporary folder (each candidate run's line names it)."""
    if args.session:
        return Path(args.session)
    if args.junit and args.junit != "-" and _a_file(Path(args.junit)):
        beside = Path(args.junit).with_suffix(".opscope")
        try:
            beside.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise GateError(f"cannot make its folder: {one_line(exc)}", beside) from exc
        return beside
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(tempfile.gettempdir()) / f"opscope-gate-{stamp}-{os.getpid()}.opscope"


def candidate_request(args: argparse.Namespace, config: RunConfig, session: Path) -> TrialRequest:
    """One candidate run: `opscope bench`'s run of it, without the accuracy check (not the
    gate's job), recorded in `session`."""
    timing = TimingPlan(warmup_runs=args.warmup, min_runs=args.min_runs, duration_s=args.duration)
    return TrialRequest(
        workload_of(args, config), args.duration, str(session),
        timing=timing, seed=args.seed, accuracy=False,
    )  # fmt: skip


def record_candidates(
    args: argparse.Namespace, config: RunConfig, session: Path, out: TextIO
) -> list[int]:
    """Run the K candidates one after another, each a job in its own process (a crash in
    the runtime fails the gate in one line); the ids of the runs they recorded. Ctrl+C or
    SIGTERM stops the running one (it records its run as cancelled) and keeps the file.
    Each run records where it came from: this gate's repeat i ("gate 1, repeat 2" in every
    run list; engine/session/origins.py), not a bench a person typed."""
    req = candidate_request(args, config, session)
    key = new_tune_key()
    ids: list[int] = []
    for i in range(1, args.runs + 1):
        before = set(_run_ids(session))
        repeat = dataclasses.replace(req, origin=gate_origin(key, i))
        try:
            # always a fresh interpreter, as a CI job runs it: a candidate forked from a fork
            # server (engine/run/job_start.py) would share that server's memory layout
            ended = run_isolated(trial_job, (repeat,), math.inf, grace_s=STOP_WAIT_S, start="spawn")
        except KeyboardInterrupt:
            done = f"{len(ids)} candidate run{'s' if len(ids) != 1 else ''}"
            sys.stderr.write(f"opscope: {done} recorded before the interruption, in {session}\n")
            raise
        new = sorted(set(_run_ids(session)) - before)
        if ended.status != "done" or not new:
            why = {
                "done": "no run recorded",
                "failed": ended.error,
                "cancelled": "cancelled",
                "crashed": describe_exit(ended.exitcode, "the candidate's engine"),
            }.get(ended.status, ended.status)
            raise GateError(f"candidate run {i}/{args.runs} failed: {one_line(Exception(why))}")
        ids += new
        out.write(f"candidate  run {i}/{args.runs}  {_brief(session, new[-1])}\n")
        out.flush()
    return ids


def _run_ids(session: Path) -> list[int]:
    if not session.exists():
        return []
    with SessionReader.open(session) as reader:
        return [r.id for r in reader.runs()]


def _brief(session: Path, run_id: int) -> str:
    """'demo_cnn.onnx:7  p50 1.002 ms  512 samples'."""
    with SessionReader.open(session) as reader:
        s = summarize(reader.run(run_id))
    p50 = "-" if s.p50_ms is None else f"{s.p50_ms:.3f} ms"
    return f"{printable(session)}:{run_id}  p50 {p50}  {s.samples} samples"


def side_notes(base: RunSet, cand: RunSet) -> list[str]:
    """What the reader should know: a changed model file, runs flagged unstable."""
    notes = []
    shas = {r.model_sha256 for r in base.runs}, {r.model_sha256 for r in cand.runs}
    if shas[0] != shas[1]:
        notes.append("the model file differs from the baseline's (another sha256)")
    for side, s in (("baseline", base), ("candidate", cand)):
        unstable = [r.id for r in s.runs if r.stable is False]
        if unstable:
            notes.append(
                f"{side} runs {', '.join(map(str, unstable))} were flagged unstable "
                "(their windows differ by >10%)"
            )
    return notes


def print_report(report: GateReport, out: TextIO) -> None:
    out.write(f"model      {printable(report.model)}  {printable(report.config)}\n\n")
    for r in report.results:
        change = -r.slowdown_pct if r.higher_is_better else r.slowdown_pct
        out.write(
            f"{r.metric:<10} {value_text(r.baseline, r.unit)} -> "
            f"{value_text(r.candidate, r.unit)} ({pct_text(change)}); slowdown lower bound "
            f"{pct_text(r.slowdown_bound_pct)} ({r.confidence:.0%} one-sided)\n"
            f"{'':<10} {printable(runs_text(r))}\n"
        )
    notes = dict.fromkeys([*(n for r in report.results for n in r.notes), *report.notes])
    for note in notes:
        out.write(f"note: {printable(note)}\n")
    for line in report.busy:
        out.write(f"machine    {printable(line)}\n")
    if report.status == "inconclusive":
        out.write(printable(inconclusive_line(report)) + "\n")
        return
    for r in report.results:
        out.write(verdict(r) + "\n")


def _a_file(path: Path) -> bool:
    """--junit names a file (not a device, a FIFO or /dev/stdout): a session may go beside."""
    from engine.files import output_kind

    try:
        return output_kind(path)[0] in ("file", "new")
    except OSError:
        return False


def write_text(path: str, text: str) -> None:
    write_atomic(path, lambda fh: fh.write(text))  # an OS error: one line naming the file
