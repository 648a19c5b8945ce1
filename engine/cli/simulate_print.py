"""What `opscope simulate` prints beyond a serving run's figures: what the answer cannot
promise (past capacity, beyond the calibrated batching, a busy calibration), a recorded
run beside its prediction, and the answers (max rate, tuning, the curve)."""

from __future__ import annotations

import math
from typing import Any, TextIO

from engine.measure.contention import Contention
from engine.serve.sim.what_if_flags import rate_text


def print_honesty(r: dict[str, Any], out: TextIO) -> None:
    """How busy the machine was while the calibration was measured, and every flag."""
    out.write(f"machine    {r['calibration']['contention_line']}\n")
    for flag in r.get("flags") or []:
        if not flag.startswith("calibrated busy"):  # said on the line above
            out.write(f"FLAG       {flag}\n")


def contention_side_by_side(run: Any, calibration: Any, what: str = "the recorded run") -> str:
    """ "{what} busy (...) · the calibration quiet (...)", so that a busy one explains a
    miss; '' when neither is known."""
    a, b = Contention.from_json(run), Contention.from_json(calibration)
    if a is None and b is None:
        return ""

    def said(c: Contention | None) -> str:
        if c is None:
            return "not measured"
        return f"{c.verdict} (others used {c.others_cpu:.2f} of {c.cpus} CPUs)"

    return f"machine: {what} {said(a)} · the calibration {said(b)}"


def print_replayed(r: dict[str, Any], out: TextIO) -> None:
    rep = r.get("replayed")
    if not rep or not rep.get("latency_ms"):
        return
    m, p = rep["latency_ms"], r["latency_ms"]
    what = "predicted" if rep["simulated"] else "measured"

    def value(d: dict[str, Any], key: str) -> float:  # the file's figure may be anything
        v = d.get(key) if isinstance(d, dict) else None
        ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        return float(v) if ok else math.nan  # type: ignore[arg-type]

    def shown(key: str) -> str:
        v = value(m, key)
        return f"{v:.3f} ms" if math.isfinite(v) else "- ms"

    def delta(key: str) -> str:
        mine, theirs = value(p, key), value(m, key)
        if not (math.isfinite(mine) and math.isfinite(theirs)) or theirs == 0:
            return ""
        return f" ({(mine / theirs - 1) * 100:+.0f}% here)"

    out.write(
        f"recorded   run {rep['run']} ({rep['kind']}) {what} p50 {shown('p50')}"
        f"{delta('p50')}  p99 {shown('p99')}{delta('p99')}\n"
    )
    side = contention_side_by_side(rep.get("contention"), r["calibration"].get("contention"))
    if side:
        out.write(f"           {side}\n")


def print_answers(r: dict[str, Any], out: TextIO) -> None:
    w = out.write
    if "max_rate" in r:
        find = r["find"]
        beyond = "at least " if find.get("beyond") else ""
        w(f"max rate   {beyond}{rate_text(r['max_rate'])} meets p99 <= {find['slo_p99_ms']:g} ms")
        at = find["at_max_rate"]
        w(f" (simulated p99 {at['latency_ms']['p99']:.3f} ms" if at else " (none does")
        w(", every rate on the curve meets it)\n" if find.get("beyond") else ")\n")
        conf = find.get("confirmed")
        if conf:
            m, p = conf["measured"]["latency_ms"], conf["predicted"]["latency_ms"]
            verdict = "meets" if conf["meets_slo"] else "MISSES"
            w(
                f"confirmed  {conf['seconds']:g} s served at {conf['rate']:.1f}/s: p50 "
                f"{m['p50']:.3f} ms (predicted {p['p50']:.3f}), p99 {m['p99']:.3f} ms "
                f"(predicted {p['p99']:.3f}): {verdict} the SLO of {conf['slo_p99_ms']:g} ms; "
                f"its batches ran {conf['service_ratio']:.2f}x their calibrated times\n"
            )
            side = contention_side_by_side(
                conf.get("contention"), r["calibration"].get("contention"), "served"
            )
            if side:
                w(f"           {side}\n")
            if not conf["meets_slo"]:
                w(
                    "           the engine was slower than calibrated, or stalled: leave "
                    "headroom below the max rate, or --recalibrate on a quieter machine\n"
                )
    if r.get("trials"):
        w("tuning     max batch x delay x instances, by capacity under the SLO:\n")
        for trial in r["trials"][:8]:
            w(
                f"           max batch {trial['max_batch']:>3}  delay {trial['delay_ms']:>4g} ms  "
                f"{trial['instances']} inst  ->  {trial['max_rate']:9.1f} requests/s  "
                f"(p99 {trial['p99_ms']:.3f} ms)\n"
            )
    for point in r.get("curve", []):
        w(
            f"curve      offered {point['offered_per_s']:9.1f}/s  served "
            f"{point['throughput_per_s']:9.1f}/s  p50 {point['p50_ms']:8.3f} ms  p99 "
            f"{point['p99_ms']:9.3f} ms{'  <- knee' if point['knee'] else ''}\n"
        )
