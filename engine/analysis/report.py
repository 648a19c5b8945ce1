"""A self-contained HTML report of one session file: environment, runs, latency
distributions, top ops, telemetry, and every run compared with the first run of its model.

One file that opens offline: inline CSS, figures as inline SVG (engine/analysis/report_plots.py),
no scripts and no fetches. A session file is untrusted input, so every text that comes
from it passes through `html.escape` (`Html` marks the few strings we built as markup).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from engine import __version__
from engine.analysis import report_plots
from engine.analysis.deltas import CompareError, MetricDelta, OpDiff, Samples
from engine.analysis.export import write_text
from engine.analysis.generation_report import generation_section
from engine.analysis.llm_studies import llm_section
from engine.analysis.memory_report import memory_section
from engine.analysis.report_html import Html, esc
from engine.analysis.report_html import byte_size as _bytes
from engine.analysis.report_html import figure as _figure
from engine.analysis.report_html import num as _num
from engine.analysis.report_html import pct as _pct
from engine.analysis.report_html import section as _section
from engine.analysis.report_html import table as _table
from engine.analysis.report_runs import runs_section
from engine.analysis.run_compare import RunComparison, compare_runs, load_changes
from engine.analysis.run_summary import machine_text, with_recorded_stats
from engine.analysis.serving_report import serving_section
from engine.analysis.sweep_report import sweep_section
from engine.config import PRECISION_LABELS, provider_label
from engine.errors import OpScopeError
from engine.measure.op_stats import stat_to_json
from engine.session.model_rows import ModelRow
from engine.session.reader import SessionReader
from engine.session.rows import RunRow

TOP_OPS = 15
TOP_DIFFS = 10
MAX_MARKERS = 100


class ReportError(OpScopeError):
    """The report cannot be written where asked."""


def write_report(session_path: str, out_path: str) -> None:
    """Read a session file and write its HTML report (OpScopeError on bad input)."""
    if _same_file(out_path, session_path):
        raise ReportError("the report would overwrite the session file itself", out_path)
    with SessionReader.open(session_path) as reader:
        text = build_report(reader, Path(session_path).name)
    write_text(out_path, text)


def _same_file(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError before Python 3.13)
        return False


def default_output(session_path: str) -> str:
    """FILE.opscope -> FILE.html (FILE.html -> FILE.html.html, never the input itself)."""
    p = Path(session_path)
    return str(p.with_suffix(".html") if p.suffix.lower() != ".html" else f"{p}.html")


def build_report(reader: SessionReader, source: str) -> str:
    """The whole page as one string."""
    meta, runs = reader.meta(), reader.runs()
    samples = {r.id: reader.latency(r.id) for r in runs}
    timed = [r for r in runs if samples[r.id][1].size >= 2]
    serving = serving_section(reader, runs)
    generation = generation_section(reader, runs)
    sweeps = sweep_section(reader.sweeps())
    memory = memory_section(reader.memory())
    llm = llm_section(reader.llm_studies())
    parts = [
        _env_section(meta, reader.models(), reader.machines()),
        runs_section([with_recorded_stats(r, samples[r.id][1]) for r in runs]),
        _latency_section(timed, samples),
        serving,
        generation,
        llm,
        sweeps,
        memory,
        _ops_section(reader, runs),
        _telemetry_section(reader, runs),
        _compare_section(reader, timed, samples),
        _markers_section(reader),
    ]
    created = meta.get("created_at") or "?"
    now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    nav = "".join(
        f'<a href="#{k}">{v}</a>'
        for k, v in (
            ("environment", "Environment"),
            ("runs", "Runs"),
            ("latency", "Latency"),
            *((("serving", "Serving"),) if serving else ()),
            *((("generation", "Generation"),) if generation else ()),
            *((("llm", "LLM serving"),) if llm else ()),
            *((("sweeps", "Scaling"),) if sweeps else ()),
            *((("memory", "Memory"),) if memory else ()),
            ("ops", "Top ops"),
            ("telemetry", "Telemetry"),
            ("comparison", "Comparison"),
            ("markers", "Notes"),
        )
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>OpScope report: {esc(source)}</title><style>{CSS}</style></head><body>"
        f"<header><h1>OpScope session report</h1><p><b>{esc(source)}</b> &middot; "
        f"{len(runs)} run{'s' if len(runs) != 1 else ''} &middot; created {esc(created)} "
        f"&middot; report generated {esc(now)} by OpScope {esc(__version__)}</p>"
        f"<nav>{nav}</nav></header><main>{''.join(parts)}</main>"
        f"<footer>{FOOTER}</footer></body></html>\n"
    )


# -- sections --------------------------------------------------------------------------


def _env_section(
    meta: dict[str, str | None],
    models: Sequence[ModelRow],
    machines: dict[str, dict[str, str]] | None = None,
) -> str:
    rows = [(k, v if v is not None else "-") for k, v in meta.items()]
    body = _table(("key", "value"), rows)
    if machines:  # engine hosts over SSH: the runs whose host column names them ran there
        body += "<p>Runs recorded here from engine hosts on other machines:</p>" + _table(
            ("engine host", "machine"), [(n, machine_text(f)) for n, f in machines.items()]
        )
    out = _section("environment", "Environment", body)
    if models:
        mrows = [
            (
                m.name or "?",
                str(m.sha256)[:12],
                _bytes(m.file_bytes),
                ", ".join(_io(v) for v in m.inputs),
                m.path or "-",
            )
            for m in models
        ]
        out += _table(("model", "sha256", "size", "inputs", "path"), mrows, right={2})
    return out


def _latency_section(
    timed: Sequence[RunRow], samples: dict[int, tuple[np.ndarray, np.ndarray]]
) -> str:
    if not timed:
        return _section("latency", "Latency", "<p>No run has latency samples.</p>")
    series = [
        (f"run {r.id}: {short_label(r)}", samples[r.id][1].astype(np.float64) / 1e6) for r in timed
    ]
    body = [
        _figure(
            report_plots.ecdf_svg(series),
            "Every timed run's latency ECDF (percentiles come from the raw samples).",
        )
    ]
    for r in timed:
        starts, lats = samples[r.id]
        body.append(
            _figure(
                report_plots.run_latency_svg(r.id, starts, lats),
                f"Run {r.id} ({short_label(r)}): {lats.size} samples; histogram "
                "and latency over time (median and p99 per time bin).",
            )
        )
    return _section("latency", "Latency", "".join(body))


def _ops_section(reader: SessionReader, runs: Sequence[RunRow]) -> str:
    body = []
    for r in runs:
        profiles = reader.profiles(r.id)
        if not profiles:
            continue
        nodes, types = reader.ops(r.id, "node"), reader.ops(r.id, "op_type")
        if not nodes:
            continue
        p = profiles[-1]
        providers = ", ".join(
            f"{k.replace('ExecutionProvider', '')} {v}" for k, v in p.provider_nodes.items()
        )
        body.append(
            f'<h3>Run {r.id}: {esc(short_label(r))}</h3><p class="small">'
            f"{len(profiles)} profiling pass{'es' if len(profiles) > 1 else ''}; the "
            f"last profiled {p.runs} inferences; node time covers "
            f"{_pct(p.coverage)} of each inference; profiling overhead "
            f"{_pct(p.overhead)}; nodes per provider: {esc(providers or '-')}</p>"
        )
        body.append(
            _figure(
                report_plots.ops_bar_svg(r.id, [stat_to_json(n) for n in nodes]),
                f"The slowest nodes of run {r.id} (mean per inference).",
            )
        )
        head = ("node", "op type", "provider", "ms", "share", "bytes", "GB/s", "GFLOP/s")
        body.append(
            _table(
                head,
                [
                    (
                        n.name,
                        n.op_type,
                        provider_label(n.provider),
                        _num(n.time_ms),
                        _pct(n.share),
                        _bytes(n.bytes),
                        _num(n.gbps, 2),
                        _num(n.gflops, 2),
                    )
                    for n in nodes[:TOP_OPS]
                ],
                right={3, 4, 5, 6, 7},
            )
        )
        body.append(
            _table(
                ("op type", "nodes", "ms", "share"),
                [
                    (t.op_type, _count(t.calls), _num(t.time_ms), _pct(t.share))
                    for t in types[:TOP_OPS]
                ],
                right={1, 2, 3},
            )
        )
    return _section(
        "ops",
        "Top ops",
        "".join(body)
        or "<p>No run was profiled (record one with <code>opscope profile</code>).</p>",
    )


def _telemetry_section(reader: SessionReader, runs: Sequence[RunRow]) -> str:
    body = []
    for r in runs:
        series = reader.telemetry(r.id)
        if not series:
            continue
        origin = r.timing_origin_ns or min(
            (int(t[0]) for t, _ in series.values() if t.size), default=0
        )
        body.append(f"<h3>Run {r.id}: {esc(short_label(r))}</h3>")
        body.append(
            _figure(report_plots.telemetry_svg(r.id, series, origin), f"Telemetry of run {r.id}.")
        )
        body.append(
            _table(
                ("quantity", "samples", "min", "mean", "max"),
                [
                    (
                        name,
                        str(v.size),
                        _num(_stat(np.nanmin, v)),
                        _num(_stat(np.nanmean, v)),
                        _num(_stat(np.nanmax, v)),
                    )
                    for name, (_, v) in sorted(series.items())
                ],
                right={1, 2, 3, 4},
            )
        )
    return _section(
        "telemetry",
        "Telemetry",
        "".join(body) or "<p>No telemetry was recorded with these runs.</p>",
    )


def _compare_section(
    reader: SessionReader,
    timed: Sequence[RunRow],
    samples: dict[int, tuple[np.ndarray, np.ndarray]],
) -> str:
    pairs = baseline_pairs(timed)
    if not pairs:
        return _section(
            "comparison", "Comparison", "<p>No two timed runs of the same model to compare.</p>"
        )
    rows, details = [], []
    for base, cand in pairs:
        try:
            comp = compare_runs(
                (reader, base),
                (reader, cand),
                "p50",
                ("throughput",),
                samples=(_samples(base, samples), _samples(cand, samples)),
            )
        except CompareError as exc:
            rows.append((str(cand.id), str(base.id), "-", "-", "-", "-", [exc.message]))
            continue
        p50, tp = comp.metrics["p50"], comp.metrics["throughput"]
        acc = comp.accuracy_delta.get("cosine")
        judged = not (comp.unlike or comp.busy)  # else shown plain, with why not
        no_verdict = [f"no verdict: not like for like ({'; '.join(comp.unlike)})"] * bool(
            comp.unlike
        ) + [f"no verdict: {b}" for b in comp.busy]
        change = (
            ", ".join(
                [
                    *(
                        f"{k} {v[0]} → {v[1]}"
                        for k, v in comp.config_diff.items()
                        if k not in ("model", "model_sha256")
                    ),
                    *(c.replace(" -> ", " → ") for c in load_changes(comp.load_diff)),
                ]
            )
            or "same config"
        )
        rows.append(
            (
                str(cand.id),
                str(base.id),
                change,
                Html(_delta_html(p50, judged)),
                Html(_delta_html(tp, judged)),
                "-" if acc is None else f"{acc:+.5f}",
                [*no_verdict, *comp.notes],
            )
        )
        details.append(_diff_block(comp))
    table_rows, footnotes = footnoted(rows)
    intro = (
        "<p>Each run against the first timed run of the same model. Deltas are "
        "relative to that run; the interval is a 95% circular block-bootstrap interval "
        'of the difference. <span class="worse">Red</span>: significantly worse, '
        '<span class="better">green</span>: significantly better; never coloured when '
        "either run was measured busy or the inputs differ (the notes say why).</p>"
    )
    head = (
        "run",
        "vs run",
        "what changed",
        "p50 latency",
        "throughput (samples/s)",
        "Δ cosine",
        "notes",
    )
    return _section(
        "comparison",
        "Comparison",
        intro + _table(head, table_rows, right={0, 1, 3, 4, 5}) + footnotes + "".join(details),
    )


def footnoted(
    rows: Sequence[tuple[object, ...]],
) -> tuple[list[tuple[object, ...]], str]:
    """Rows whose last cell is a list of notes, with a note found on more than one row
    said once, below the table, and marked [n] on its rows (every row repeated "the
    baseline run was flagged unstable (its windows differ by >10%)"); notes of one row
    stay in it. Returns (the rows, the footnotes' HTML: "" when there are none)."""
    seen: dict[str, int] = {}
    for row in rows:
        for note in dict.fromkeys(row[-1]):  # type: ignore[call-overload]
            seen[note] = seen.get(note, 0) + 1
    shared = [n for n, times in seen.items() if times > 1]
    number = {n: i for i, n in enumerate(shared, 1)}
    out = []
    for row in rows:
        notes: list[str] = list(dict.fromkeys(row[-1]))  # type: ignore[call-overload]
        own = "; ".join(esc(n) for n in notes if n not in number)
        marks = " ".join(f'<sup class="fn">[{number[n]}]</sup>' for n in notes if n in number)
        out.append((*row[:-1], Html(" ".join(p for p in (own, marks) if p) or "-")))
    if not shared:
        return out, ""
    items = "".join(f"<li>{esc(n)}</li>" for n in shared)
    return out, f'<ol class="fn">{items}</ol>'


def _markers_section(reader: SessionReader) -> str:
    markers = reader.markers()
    if not markers:
        return ""
    rows = [
        ("-" if m.run_id is None else str(m.run_id), m.kind, m.label, m.text)
        for m in markers[:MAX_MARKERS]
    ]
    more = f"<p>… and {len(markers) - MAX_MARKERS} more.</p>" if len(markers) > MAX_MARKERS else ""
    return _section(
        "markers", "Notes and markers", _table(("run", "kind", "label", "text"), rows) + more
    )


# -- comparison helpers ----------------------------------------------------------------


def baseline_pairs(timed: Sequence[RunRow]) -> list[tuple[RunRow, RunRow]]:
    """(first timed run of the model, later timed run of the same model), in run order."""
    first: dict[str, RunRow] = {}
    pairs = []
    for r in timed:
        key = r.model_sha256 or r.model_name or "?"
        if key in first:
            pairs.append((first[key], r))
        else:
            first[key] = r
    return pairs


def _samples(run: RunRow, samples: dict[int, tuple[np.ndarray, np.ndarray]]) -> Samples:
    batch = run.batch or (run.config.batch if run.config else 1)
    return Samples(*samples[run.id], batch=max(1, batch))


def _delta_html(m: MetricDelta, judged: bool = True) -> str:
    """The delta and its interval, coloured only where it is a result (`judged`)."""
    significant = m.significant and judged
    cls = "same" if not significant else ("worse" if m.slowdown_pct > 0 else "better")
    lo, hi = m.ci_pct
    return (
        f'<span class="{cls}">{esc(_signed(m.delta_pct))}</span> '
        f'<span class="small">[{esc(_signed(lo))}, {esc(_signed(hi))}]</span>'
    )


def _diff_block(comp: RunComparison) -> str:
    b, c = comp.baseline, comp.candidate
    title = f"<h3>Run {c.id} vs run {b.id}: per-op differences</h3>"
    if not comp.ops:
        return title + '<p class="small">No per-op comparison: both runs need a profile.</p>'
    head = ("node", "op type", "", "base ms", "cand ms", "Δ ms", "Δ %", "Δ bytes")
    rows = [_diff_row(d) for d in comp.ops[:TOP_DIFFS]]
    lines = []
    for kind, what in (("node", "nodes"), ("op_type", "op types")):
        for verb, diffs in (("removed", comp.removed(kind)), ("added", comp.added(kind))):
            if diffs:
                names = ", ".join(d.key for d in diffs[:12]) + (" …" if len(diffs) > 12 else "")
                lines.append(f"<li>{len(diffs)} {what} {verb}: {esc(names)}</li>")
    types = ""
    if comp.op_types:
        types = '<p class="small">By op type (nodes of one type added up):</p>' + _table(
            ("op type", "", "base ms", "cand ms", "Δ ms", "Δ %", "Δ bytes"),
            [_diff_row(d)[1:] for d in comp.op_types[:TOP_DIFFS]],
            right={2, 3, 4, 5, 6},
        )
    return (
        title
        + _table(head, rows, right={3, 4, 5, 6, 7})
        + types
        + (f'<ul class="small">{"".join(lines)}</ul>' if lines else "")
    )


def _diff_row(d: OpDiff) -> tuple[str, ...]:
    pct = d.delta_time_pct
    status = {"both": "", "added": "added", "removed": "removed"}[d.status]
    return (
        d.key,
        d.op_type,
        status,
        _num(d.base_time_ms),
        _num(d.cand_time_ms),
        f"{d.delta_time_ms:+.3f}",
        "-" if pct is None else _signed(pct),
        _bytes(d.delta_bytes, signed=True),
    )


# -- formatting ------------------------------------------------------------------------


def short_label(r: RunRow) -> str:
    c = r.config
    config = f"{PRECISION_LABELS[c.precision]} b{c.batch} fusion {c.fusion}" if c else "?"
    return f"{r.model_name or '?'} {config}"


def _count(n: int | None) -> str:
    return "-" if n is None else str(n)


def _io(v: Any) -> str:
    if not isinstance(v, dict):
        return "?"
    shape = v.get("shape")
    dims = "x".join(str(d) for d in shape) if isinstance(shape, list) else "?"
    return f"{v.get('name', '?')}: {v.get('dtype', '?')}[{dims}]"


def _stat(fn: Any, v: np.ndarray) -> float | None:
    finite = v[np.isfinite(v)]
    return float(fn(finite)) if finite.size else None


def _signed(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{x:+.1f}%"


CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;
color:#1d1d1f;background:#fafafa}
header{background:#1f2937;color:#f9fafb;padding:14px 28px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 8px;color:#d1d5db}nav a{color:#93c5fd;margin-right:14px}
main{padding:4px 28px 28px;max-width:1200px}section{margin-top:26px}
h2{border-bottom:2px solid #e5e7eb;padding-bottom:4px;font-size:18px}h3{font-size:15px}
table{border-collapse:collapse;margin:8px 0 14px;font-size:12.5px;background:#fff}
th,td{border:1px solid #e5e7eb;padding:3px 8px;text-align:left;vertical-align:top;
max-width:420px;overflow-wrap:break-word}th{background:#f3f4f6;white-space:nowrap}td.r{text-align:right;
white-space:nowrap;font-variant-numeric:tabular-nums}
figure{margin:10px 0;background:#fff;border:1px solid #e5e7eb;padding:6px}
figure svg{max-width:100%;height:auto}figcaption{font-size:12px;color:#4b5563}
.small{font-size:12px;color:#4b5563}.worse{color:#b91c1c;font-weight:600}
.better{color:#15803d;font-weight:600}.same{color:#374151}.warn{color:#b45309}
.tok{white-space:nowrap}.wide{overflow-x:auto}table.runs td{max-width:none}
sup.fn{font-size:10px;color:#6b7280}ol.fn{font-size:12px;color:#4b5563;margin:0 0 14px}
.pair{display:flex;gap:24px;flex-wrap:wrap;align-items:flex-start}
.badge{font-size:11px;font-weight:700;padding:1px 7px;border-radius:3px;color:#fff;
vertical-align:middle}.sim{background:#b45309}.served{background:#1d4ed8}
footer{padding:14px 28px;font-size:12px;color:#6b7280;border-top:1px solid #e5e7eb}
"""

FOOTER = (
    "Latency percentiles are computed from the raw per-inference samples (never averaged); "
    "throughput is inferences per wall-clock second times the batch. Intervals come from a "
    "circular block bootstrap (2000 resamples, blocks of about &radic;n samples, at most "
    "20,000 samples per run) and cover the noise inside the runs, not a machine that was "
    "uniformly slower during one whole run. Per-op times come from a separate profiling "
    "pass (the profiler costs 8-22% latency) and are matched by node name; nodes renamed "
    "by fusion or quantization show as removed and added. The machine column says how busy "
    "the machine was while each run was measured (the CPU time other processes took); a "
    "comparison with a busy run, or between other input shapes, draws no verdict."
)
