"""The report's section on serving runs (kinds load and simulate): each run's set-up and
figures, end-to-end latency over time above the traffic, queue depth, batch sizes, and
the capacity curve when the simulator drew one. A simulated run says so everywhere.

Everything from the file is escaped (engine/analysis/report_html.py); figures are inline
SVG (engine/analysis/serving_plots.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from engine.analysis import serving_plots
from engine.analysis.export import serving_runs
from engine.analysis.json_fields import count_text, mapping, number, whole
from engine.analysis.report_html import Html, esc, figure, num, pct, section, table
from engine.serve.records import summarize
from engine.session.reader import SessionReader
from engine.session.rows import RunRow
from engine.session.serving_rows import ServingRun

SIMULATED_BADGE = Html('<span class="badge sim">SIMULATED</span>')
SERVED_BADGE = Html('<span class="badge served">served under load</span>')


def serving_section(reader: SessionReader, runs: Sequence[RunRow]) -> str:
    """The whole "Serving" section ("" when the session holds no serving run)."""
    found = serving_runs(reader, runs)
    if not found:
        return ""
    intro = (
        "<p>Runs that served a stream of requests: latency here is <b>end to end</b>, "
        "from each request's scheduled arrival to its response (queueing and batching "
        "included), not per inference. <b>SIMULATED</b> runs are the discrete-event "
        "simulator's prediction from a calibration of the model, not measurements. "
        "Figures leave out the requests due during the warm-up (shaded).</p>"
    )
    return section("serving", "Serving", intro + "".join(_run_block(r, s) for r, s in found))


def _run_block(run: RunRow, s: ServingRun) -> str:
    summary = s.summary or summarize(s.records, s.warmup_s)
    what = "SIMULATED prediction" if s.simulated else "served under load"
    spec = str(s.traffic.get("spec") or s.traffic.get("kind") or "?")
    title = (
        f"Run {run.id}: {run.model_name or '?'}, {what}: {spec}, "
        f"max batch {s.batching.get('max_batch', '?')}"
    )
    badge = SIMULATED_BADGE if s.simulated else SERVED_BADGE
    parts = [
        f"<h3>Run {run.id}: {esc(run.model_name or '?')} {badge}</h3>",
        '<div class="pair">',
        table(("set-up", ""), setup_rows(s)),
        table(("figures", ""), figure_rows(summary, s.simulated), right={1}),
        "</div>",
    ]
    rec = s.records
    if len(rec):
        parts.append(
            figure(
                serving_plots.timeline_svg(run.id, rec, s.warmup_s, title),
                f"Run {run.id}{' (SIMULATED)' if s.simulated else ''}: end-to-end latency "
                "(p50 and p99 of the requests due in each time bin, from the scheduled "
                "arrival) above the traffic offered (requests due per second).",
            )
        )
        parts.append(
            figure(
                serving_plots.queue_batches_svg(
                    run.id, rec, s.warmup_s, whole(s.batching.get("max_batch"))
                ),
                f"Run {run.id}{' (SIMULATED)' if s.simulated else ''}: requests waiting "
                "in the queue over time, and the sizes of the batches run after the "
                "warm-up.",
            )
        )
    else:
        parts.append('<p class="small">The run recorded no request.</p>')
    curve = s.answers.get("curve")
    if isinstance(curve, list) and curve and all(isinstance(p, Mapping) for p in curve):
        knee = next((p for p in curve if p.get("knee") is True), None)
        where = (
            f" The knee (where latency starts to climb) is at about "
            f"{num(number(knee.get('offered_per_s')), 0)} requests/s."
            if knee
            else ""
        )
        parts.append(
            figure(
                serving_plots.curve_svg(run.id, curve),
                f"Run {run.id}: capacity curve{' (SIMULATED)' if s.simulated else ''}: "
                f"the same set-up at {len(curve)} offered rates.{where}",
            )
        )
    return "".join(parts)


# -- tables ----------------------------------------------------------------------------


def setup_rows(s: ServingRun) -> list[tuple[str, object]]:
    t, b, c = s.traffic, s.batching, s.cache
    loop = "closed loop" if t.get("closed_loop") else "open loop"
    traffic = f"{t.get('spec') or t.get('kind') or '?'} ({loop}"
    if t.get("seed") is not None:
        traffic += f", seed {t['seed']}"
    if isinstance(t.get("duration_s"), int | float):
        traffic += f", {t['duration_s']:g} s"
    rows: list[tuple[str, object]] = [
        (
            "run by",
            Html(f"{SIMULATED_BADGE} the discrete-event simulator (a prediction)")
            if s.simulated
            else "the real serving loop (measured)",
        ),
        ("traffic", traffic + ")"),
        ("batching", batching_text(b)),
        ("cache", cache_text(c)),
        ("warm-up", f"{s.warmup_s:g} s"),
    ]
    medians = (s.calibration or {}).get("median_ms")
    if s.simulated and isinstance(medians, Mapping) and medians:
        pairs = ", ".join(f"{k}: {num(number(ms))} ms" for k, ms in list(medians.items())[:12])
        rows.append(("calibration", f"median service time per batch size {pairs}"))
    answers = s.answers
    if isinstance(answers.get("max_rate"), int | float):
        rows.append(("max rate", f"{answers['max_rate']:.1f} requests/s within the SLO"))
    best = answers.get("best")
    if isinstance(best, Mapping):
        rows.append(("best batching", ", ".join(f"{k} {v}" for k, v in best.items())))
    return rows


def figure_rows(summary: Mapping[str, Any], simulated: bool) -> list[tuple[str, str]]:
    req = mapping(summary, "requests")
    lat, sizes = mapping(summary, "latency_ms"), mapping(summary, "batch_size")
    depth, cache = mapping(summary, "queue_depth"), mapping(summary, "cache")
    tp = number(mapping(summary, "throughput").get("requests_per_s"))
    hits = f"{count_text(req.get('cache_hits', 0))} (hit rate {pct(number(cache.get('hit_rate')))})"
    sent, warm = count_text(req.get("sent")), count_text(req.get("warmup", 0))
    return [
        ("requests sent", f"{sent} ({warm} in the warm-up)"),
        ("completed", count_text(req.get("completed"))),
        ("rejected", count_text(req.get("rejected"))),
        ("timed out", count_text(req.get("timed_out"))),
        ("cache hits", hits),
        (
            "latency p50 / p90 / p99" + (" (predicted)" if simulated else ""),
            _ms(lat, "p50", "p90", "p99"),
        ),
        ("latency max", f"{num(number(lat.get('max')))} ms (n = {lat.get('count', '-')})"),
        ("queue wait p50 / p99", _ms(mapping(summary, "queue_ms"), "p50", "p99")),
        ("service p50 / p99", _ms(mapping(summary, "service_ms"), "p50", "p99")),
        ("batches", f"{sizes.get('count', '-')}, mean size {num(number(sizes.get('mean')), 2)}"),
        ("queue depth max / p99", f"{depth.get('max', '-')} / {num(number(depth.get('p99')), 0)}"),
        ("throughput", f"{num(tp, 1)} requests/s"),
    ]


def _ms(d: Mapping[str, Any], *keys: str) -> str:
    return " / ".join(num(number(d.get(k))) for k in keys) + " ms"


def batching_text(b: Mapping[str, Any]) -> str:
    """'max batch 4, preferred 2/4, delay 1 ms, queue limit 64, timeout 50 ms, 2 instances'."""
    parts = [f"max batch {b.get('max_batch', '?')}"]
    preferred = b.get("preferred")
    if isinstance(preferred, list) and preferred:
        parts.append("preferred " + "/".join(str(p) for p in preferred))
    parts.append(f"delay {_g(b.get('delay_ms'))} ms")
    parts.append(f"queue limit {b.get('queue_limit') or 'none'}")
    timeout = number(b.get("timeout_ms"))
    parts.append(f"timeout {_g(timeout)} ms" if timeout > 0 else "no timeout")
    n = b.get("instances", 1)
    parts.append(f"{n} instance{'' if n == 1 else 's'}")
    return ", ".join(parts)


def cache_text(c: Mapping[str, Any]) -> str:
    size = c.get("size") or 0
    if not size:
        return "off"
    return f"{size} responses, {pct(number(c.get('repeat')))} of requests repeat an earlier one"


def _g(v: Any) -> str:
    x = number(v)
    return "?" if not math.isfinite(x) else f"{x:g}"
