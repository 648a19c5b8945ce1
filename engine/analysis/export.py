"""Exporting a session: a Chrome trace of profiled inferences, served batches and the passes
of generations (Perfetto, chrome://tracing) and CSV tables (runs, raw latency samples, op
statistics, sweeps).

Builders are pure functions of reader records; writers open the file, build, and write
atomically. Text cells in CSV that a spreadsheet would run as a formula are defused.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from engine.analysis.generation_trace import generation_trace_events
from engine.analysis.run_summary import summarize
from engine.analysis.serving_trace import serving_trace_events
from engine.errors import OpScopeError
from engine.files import finite, write_atomic
from engine.measure.flops import node_flops
from engine.measure.op_stats import STAT_KEYS, node_bytes, stat_to_json
from engine.measure.op_trace import NodeEvent, ProfileTrace, RunSpan, Shapes
from engine.session.generation_rows import GenerationRun
from engine.session.reader import SessionReader
from engine.session.rows import RunRow
from engine.session.serving_rows import ServingRun
from engine.session.sweep_rows import SweepRow

SERVING_KINDS = ("load", "simulate")


class ExportError(OpScopeError):
    """Nothing to export (no profiled run, unknown run) or the output cannot be written."""


# -- the Chrome trace ------------------------------------------------------------------


def median_inference(trace: ProfileTrace) -> RunSpan:
    """The profiled inference of median duration (the lower middle for an even count)."""
    if not trace.runs:
        raise ValueError("the profile holds no inference")
    ordered = sorted(trace.runs, key=lambda r: (r.dur_us, r.run_index))
    return ordered[(len(ordered) - 1) // 2]


def run_label(run: RunRow) -> str:
    """'run 3: demo_cnn.onnx INT8 dynamic fusion=all batch=1 threads=2 (CPU)'."""
    return summarize(run).label


def trace_events(run: RunRow, trace: ProfileTrace) -> list[dict[str, Any]]:
    """One run's track: metadata naming its process and thread, the median inference as
    one enclosing event, and one "X" event per node execution (ts, dur in µs from the
    inference's start). pid is the run id, so every run gets its own track."""
    span = median_inference(trace)
    pid, tid = run.id, 1
    nodes = sorted(
        (n for n in trace.nodes if n.run_index == span.run_index),
        key=lambda n: (n.start_us, -n.dur_us),
    )
    node_us = sum(n.self_us for n in nodes)
    thread = (
        f"inference {span.run_index} of {len(trace.runs)} profiled "
        f"(median, {span.dur_us / 1e3:.3f} ms)"
    )
    events: list[dict[str, Any]] = [
        _meta("process_name", pid, tid, {"name": run_label(run)}),
        _meta("process_sort_index", pid, tid, {"sort_index": run.id}),
        _meta("thread_name", pid, tid, {"name": thread}),
        {
            "ph": "X",
            "name": "inference",
            "cat": "inference",
            "pid": pid,
            "tid": tid,
            "ts": 0.0,
            "dur": max(0.0, span.dur_us),
            "args": {
                "run_index": span.run_index,
                "profiled_inferences": len(trace.runs),
                "node_time_us": node_us,
                "coverage": node_us / span.dur_us if span.dur_us > 0 else None,
            },
        },
    ]
    events.extend(node_event(n, pid, tid) for n in nodes)
    return events


def node_event(n: NodeEvent, pid: int, tid: int) -> dict[str, Any]:
    """One node execution as a complete ("X") event; args hold what the profile knew."""
    flops = node_flops(n.op_type, n.input_shapes, n.output_shapes)
    nbytes = node_bytes(n)
    args: dict[str, Any] = {
        "op_type": n.op_type,
        "provider": n.provider,
        "input_shapes": shape_texts(n.input_shapes),
        "output_shapes": shape_texts(n.output_shapes),
        "bytes": nbytes,
        "activation_bytes": n.activation_bytes,
        "parameter_bytes": n.parameter_bytes,
        "output_bytes": n.output_bytes,
        "flops": flops,
        "self_us": n.self_us,
    }
    if n.parent:
        args["parent"] = n.parent
    return {
        "ph": "X",
        "name": n.name,
        "cat": n.op_type or "node",
        "pid": pid,
        "tid": tid,
        "ts": max(0.0, n.start_us),
        "dur": max(0.0, n.dur_us),
        "args": args,
    }


def _meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    """A metadata ("M") event; ts 0 so that every event carries one."""
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "ts": 0, "args": args}


def shape_texts(shapes: Shapes) -> list[str]:
    """(("float", (1, 3, 64, 64)),) -> ["float[1x3x64x64]"]."""
    return [f"{dtype}[{'x'.join(str(d) for d in shape)}]" for dtype, shape in shapes]


def build_trace(
    runs: Sequence[tuple[RunRow, ProfileTrace]],
    source: str = "",
    serving: Sequence[tuple[RunRow, ServingRun]] = (),
    generation: Sequence[tuple[RunRow, GenerationRun]] = (),
) -> dict[str, Any]:
    """The Chrome trace event format's JSON object form, one track per run: a profiled
    run's median inference, a serving run's batches, queue depth and failed requests, a
    generation run's generations with their prefill and decode steps (in memory: a whole
    session's trace is written by `write_trace`, one run at a time)."""
    events = [e for run, trace in runs for e in trace_events(run, trace)]
    notes: list[str] = []
    for st in [serving_trace_events(r, s) for r, s in serving] + [
        generation_trace_events(r, g) for r, g in generation
    ]:
        events.extend(st.events)
        notes.extend(st.notes)
    other = other_data(source, bool(serving), bool(generation), notes)
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


def other_data(source: str, serving: bool, generation: bool, notes: list[str]) -> dict[str, Any]:
    """The trace's `otherData`: what its tracks are, and what was cut."""
    other: dict[str, Any] = {
        "generator": "OpScope",
        "session": source,
        "note": "one profiled inference per run (the median by duration); "
        "ts and dur in microseconds from that inference's start",
    }
    if serving:
        other["serving_note"] = (
            "serving runs: one slice per batch on a thread per model instance, the queue "
            "depth as a counter, rejected and timed-out requests as instants; ts and dur "
            "in microseconds from the schedule's start"
        )
    if generation:
        other["generation_note"] = (
            "generation runs: one slice per timed generation with its prefill (the time to "
            "first token) and each decode step as child slices; ts and dur in microseconds "
            "from the run's timing origin, passes back to back from each generation's start"
        )
    if notes:
        other["truncated"] = notes
    return other


def _profiled(reader: SessionReader, runs: Sequence[RunRow]) -> list[tuple[RunRow, ProfileTrace]]:
    out = [(r, reader.profile_trace(r.id)) for r in runs if reader.profiles(r.id)]
    return [(r, t) for r, t in out if t.runs]


def _nothing_to_trace(reader: SessionReader, run_id: int | None, serving: bool) -> ExportError:
    which = f"run {run_id} has no profile" if run_id is not None else "no run in it has a profile"
    return ExportError(
        f"{which}{', serving or generation record' if serving else ''} to export as a trace "
        "(record one with `opscope profile MODEL --session FILE`"
        + (
            ", `opscope load MODEL --traffic ... --session FILE` or `opscope generate "
            "MODEL_FOLDER --session FILE`"
            if serving
            else ""
        )
        + ")",
        reader.path,
    )


def profiled_runs(
    reader: SessionReader, run_id: int | None = None
) -> list[tuple[RunRow, ProfileTrace]]:
    """(run, last profiling pass) for every profiled run, or for `run_id` (which must have a
    profile); ExportError when there is nothing to draw."""
    runs = [reader.run(run_id)] if run_id is not None else reader.runs()
    out = _profiled(reader, runs)
    if not out:
        raise _nothing_to_trace(reader, run_id, serving=False)
    return out


def serving_runs(reader: SessionReader, runs: Sequence[RunRow]) -> list[tuple[RunRow, ServingRun]]:
    """(run, what it served) for the serving runs (kinds load and simulate) among `runs`."""
    out = []
    for r in runs:
        s = reader.serving(r.id) if r.kind in SERVING_KINDS else None
        if s is not None:
            out.append((r, s))
    return out


def generation_runs(
    reader: SessionReader, runs: Sequence[RunRow]
) -> list[tuple[RunRow, GenerationRun]]:
    """(run, its generations' passes) for the generation runs (kind generate) among `runs`."""
    out = []
    for r in runs:
        g = reader.generation(r.id) if r.kind == "generate" else None
        if g is not None:
            out.append((r, g))
    return out


def write_trace(session_path: str, out_path: str, run_id: int | None = None) -> list[str]:
    """Write the Chrome trace of a session file (every profiled, serving or generation run,
    or one); returns what was cut to keep it bounded (one line each).

    Streamed: one run's records are read, turned into events, written and dropped before
    the next run's are read, so memory grows with the largest run, not with the session
    (the whole trace as one object, copied twice into one string, took 5 GB for a 260 MB
    session)."""
    with SessionReader.open(session_path) as reader:
        runs = [reader.run(run_id)] if run_id is not None else reader.runs()
        profiled = [r for r in runs if reader.profiles(r.id)]
        serving = [r for r in runs if r.kind in SERVING_KINDS]
        generation = [r for r in runs if r.kind == "generate"]
        notes: list[str] = []
        kinds = {"serving": False, "generation": False}

        def parts() -> Iterator[list[dict[str, Any]]]:
            for r in profiled:
                trace = reader.profile_trace(r.id)
                if trace.runs:
                    yield trace_events(r, trace)
            for r in serving:
                if (s := reader.serving(r.id)) is not None:
                    kinds["serving"] = True
                    st = serving_trace_events(r, s)
                    notes.extend(st.notes)
                    yield st.events
            for r in generation:
                if (g := reader.generation(r.id)) is not None:
                    kinds["generation"] = True
                    gt = generation_trace_events(r, g)
                    notes.extend(gt.notes)
                    yield gt.events

        first = next(parts_iter := parts(), None)
        if first is None:
            raise _nothing_to_trace(reader, run_id, serving=True)

        def fill(fh: TextIO) -> None:
            fh.write('{"traceEvents":[')
            sep = ""
            for events in itertools.chain([first], parts_iter):
                for chunk in range(0, len(events), EVENTS_PER_WRITE):
                    text = json.dumps(finite(events[chunk : chunk + EVENTS_PER_WRITE]), **COMPACT)
                    if len(text) > 2:  # not an empty list
                        fh.write(sep + text[1:-1])
                        sep = ","
            other = other_data(
                Path(session_path).name, kinds["serving"], kinds["generation"], notes
            )
            fh.write(
                f'],"displayTimeUnit":"ms","otherData":{json.dumps(finite(other), **COMPACT)}}}\n'
            )

        _atomic(Path(out_path), fill)
    return notes


EVENTS_PER_WRITE = 5000  # events encoded at a time
COMPACT: dict[str, Any] = {"separators": (",", ":")}


# -- CSV -------------------------------------------------------------------------------

RUN_COLUMNS = (
    "id",
    "kind",
    "status",
    "error",
    "model",
    "model_sha256",
    "engine",
    "precision",
    "fusion",
    "batch",
    "threads",
    "spinning",
    "provider",
    "provider_used",
    "samples",
    "mean_ms",
    "std_ms",
    "min_ms",
    "p50_ms",
    "p90_ms",
    "p95_ms",
    "p99_ms",
    "max_ms",
    "inferences_per_s",
    "samples_per_s",
    "stable",
    "warmup_runs",
    "elapsed_s",
    "cosine",
    "max_abs_err",
    "mean_abs_err",
    "top1_agreement",
    "started_at",
    "ended_at",
)
LATENCY_COLUMNS = ("run_id", "index", "start_ns", "latency_ns")
OP_COLUMNS = ("run_id", "pass", "kind", "rank", *STAT_KEYS)
SWEEP_COLUMNS = ("sweep_id", "dim", "status", "value", "size", "run_id", "series", "ms", "k")


def run_record(r: RunRow) -> dict[str, Any]:
    """One runs.csv row."""
    rec: dict[str, Any] = {
        "id": r.id,
        "kind": r.kind,
        "status": r.status,
        "error": r.error,
        "model": r.model_name,
        "model_sha256": r.model_sha256,
        "provider_used": r.provider_used,
        "samples": r.samples,
        "stable": r.stable,
        "warmup_runs": r.warmup_runs,
        "elapsed_s": r.elapsed_s,
        "started_at": r.started_at,
        "ended_at": r.ended_at,
    }
    if r.config:
        rec.update(r.config.to_json())
    if r.latency:
        rec.update({f"{k}_ms": v for k, v in r.latency.to_json().items() if k != "count"})
    if r.throughput:
        rec.update(r.throughput.to_json())
    if r.accuracy:
        acc = r.accuracy
        rec.update(
            {
                "cosine": acc.cosine,
                "max_abs_err": acc.max_abs_err,
                "mean_abs_err": acc.mean_abs_err,
                "top1_agreement": acc.top1_agreement,
            }
        )
    return rec


def op_records(reader: SessionReader, run: RunRow) -> Iterator[dict[str, Any]]:
    """ops.csv rows of the run's last profiling pass, per node then per op type."""
    profiles = reader.profiles(run.id)
    if not profiles:
        return
    last = profiles[-1].pass_
    for kind in ("node", "op_type"):
        for rank, stat in enumerate(reader.ops(run.id, kind)):
            yield {"run_id": run.id, "pass": last, "kind": kind, "rank": rank,
                   **stat_to_json(stat)}  # fmt: skip


def sweep_records(s: SweepRow) -> Iterator[dict[str, Any]]:
    """sweeps.csv rows, long form: per point, the total (p50 latency) then each op type,
    with the k fitted for that series (empty when it was not fitted)."""
    run_ids = s.run_ids if len(s.run_ids) == len(s.points) else (None,) * len(s.points)
    for p, run_id in zip(s.points, run_ids, strict=True):
        base = {"sweep_id": s.id, "dim": s.dim, "status": s.status, "value": p.value,
                "size": p.size, "run_id": run_id}  # fmt: skip
        yield {**base, "series": "total", "ms": p.latency_ms, "k": s.growth_total}
        for name, ms in p.op_types_ms.items():
            yield {**base, "series": name, "ms": ms, "k": s.growth.get(name)}


def write_csv(session_path: str, out_dir: str, run_id: int | None = None) -> list[Path]:
    """runs.csv, latency.csv (every raw sample), ops.csv and, for the whole session,
    sweeps.csv in `out_dir` (created)."""
    folder = Path(out_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot create the folder ({exc.strerror or exc})", out_dir) from exc
    paths = [folder / "runs.csv", folder / "latency.csv", folder / "ops.csv"]
    with SessionReader.open(session_path) as reader:
        runs = [reader.run(run_id)] if run_id is not None else reader.runs()
        _write_rows(paths[0], RUN_COLUMNS, (_cells(run_record(r), RUN_COLUMNS) for r in runs))
        _write_rows(paths[1], LATENCY_COLUMNS, _latency_rows(reader, runs))
        _write_rows(
            paths[2],
            OP_COLUMNS,
            (_cells(rec, OP_COLUMNS) for r in runs for rec in op_records(reader, r)),
        )
        if run_id is None:
            paths.append(folder / "sweeps.csv")
            _write_rows(
                paths[3],
                SWEEP_COLUMNS,
                (_cells(rec, SWEEP_COLUMNS) for s in reader.sweeps() for rec in sweep_records(s)),
            )
    return paths


def _latency_rows(reader: SessionReader, runs: Sequence[RunRow]) -> Iterator[Iterable[Any]]:
    for r in runs:
        starts, lats = reader.latency(r.id)
        yield from zip(
            [r.id] * lats.size, range(lats.size), starts.tolist(), lats.tolist(), strict=True
        )


def _cells(rec: dict[str, Any], columns: Sequence[str]) -> list[Any]:
    return [csv_cell(rec.get(c)) for c in columns]


def csv_cell(value: Any) -> Any:
    """None and NaN -> empty; text a spreadsheet would evaluate ('=', '+', '-', '@', tab,
    CR at the start) gets a leading apostrophe (OWASP's CSV-injection advice)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def _write_rows(path: Path, header: Sequence[str], rows: Iterable[Iterable[Any]]) -> None:
    def fill(fh: TextIO) -> None:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)

    _atomic(path, fill, newline="")


# -- writing ---------------------------------------------------------------------------


def write_text(path: str | Path, text: str) -> None:
    """Write UTF-8 text atomically (a temporary file renamed over the target)."""
    _atomic(Path(path), lambda fh: fh.write(text))


def _atomic(target: Path, fill: Callable[[TextIO], object], newline: str | None = None) -> None:
    write_atomic(target, fill, newline, error=ExportError)


def traceable_runs(session_path: str) -> list[tuple[int, str]]:
    """(run id, its label) of the runs a trace can show: profiled, serving and generation
    runs, newest last (the window's Export Trace picks one of them, or all)."""
    with SessionReader.open(session_path) as reader:
        return [
            (r.id, f"{summarize(r).label} [{r.kind}]")
            for r in reader.runs()
            if r.kind in SERVING_KINDS or r.kind == "generate" or reader.profiles(r.id)
        ]
