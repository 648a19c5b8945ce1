"""The simulator against the real serving loop: the same schedule served on the engine and
simulated from its calibration, on both demo models, several traffic patterns (bursts
included) at 50%, 70% and 85% of the calibrated full-batch capacity. The goal: p50 within
10% and p99 within 15% of the real loop's. The real loop is served `--repeats` times per
row (this machine's speed moves 10-20% within a minute), with the simulator calibrated just
before the row. The table gives the medians over the runs and their ranges; how busy the
real instance was (`busy`: the share of the time it ran batches; near 100% a few percent
of service time moves the queue a lot); how far the real batches' median duration was
from the calibration's (`svc`, real/calibrated, weighted by batches); and, to tell the
simulator's queueing from its calibration, the same schedule simulated with the service
times each real run actually saw: drawn one by one from its batches' durations by size
(`sim in-run`), and on the run's own clock (`replay`: each simulated batch runs as fast as
the real engine was running at that moment, so slow stretches and stalls come when the run
had them). Run:
    .venv/bin/python bench/serve_sim_vs_real.py [--seconds 8] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402

from engine import backends  # noqa: E402
from engine.backends.base import PrepareRequest  # noqa: E402
from engine.config import RunConfig  # noqa: E402
from engine.model.workload import Workload  # noqa: E402
from engine.serve.batching import BatchPolicy  # noqa: E402
from engine.serve.loop import ServingLoop  # noqa: E402
from engine.serve.records import ServeRecords, summarize  # noqa: E402
from engine.serve.setup import Serving, prepare_serving  # noqa: E402
from engine.serve.sim.calibration import calibration_context, load_or_calibrate  # noqa: E402
from engine.serve.sim.lateness import (  # noqa: E402
    LOOK_S,
    PARKED,
    Draw,
    send_states,
    states_at,
    taken_at_once,
)
from engine.serve.sim.open_loop import fifo_loop  # noqa: E402
from engine.serve.sim.service import ServiceModel  # noqa: E402
from engine.serve.sim.service_draws import DRAWS, ServiceDraws  # noqa: E402
from engine.serve.sim.simulate import simulate  # noqa: E402
from engine.serve.traffic.schedule import Schedule, make_schedule, parse_traffic  # noqa: E402

MODELS = ("demo_cnn", "demo_transformer")
LOADS = (0.5, 0.7, 0.85)
WARMUP_S = 1.0  # requests due in the first second are served, not counted (both sides)


def patterns(rate: float) -> dict[str, str]:
    base = rate / 1.3  # bursts: 2.5x base for a fifth of every 2 s; mean = rate
    return {
        "poisson": f"poisson:{rate:.1f}",
        "constant": f"constant:{rate:.1f}",
        "bursts": f"bursts:{base:.1f},{2.5 * base:.1f},2,0.2",
    }


def prepared_for(model: str, threads: int = 0):  # type: ignore[no-untyped-def]
    path = str(ROOT / f"resources/models/{model}.onnx")
    return backends.prepare(
        PrepareRequest(Workload(path, RunConfig(provider="cpu", threads=threads)))
    )


def serving_for(
    model: str, policy: BatchPolicy, threads: int = 0
) -> tuple[Any, Serving, dict[str, Any]]:
    """A bundled model prepared on the CPU (`threads` intra-op threads, 0: the default),
    served with `policy` (one instance), and the context its calibrations are keyed by."""
    prepared = prepared_for(model, threads)
    serving = prepare_serving(prepared, policy, model)
    context = calibration_context(model, prepared.config.to_json(), prepared.provider_used,
                                  policy.max_batch, 1)  # fmt: skip
    return prepared, serving, context


def calibrated(serving: Serving, context: dict[str, Any]) -> ServiceModel:
    """The batch times measured afresh (this machine's speed drifts over minutes)."""
    return next(x for x in load_or_calibrate(serving, context, True) if isinstance(x, ServiceModel))


def in_run_model(rec: ServeRecords, service: ServiceModel, least: int = 10) -> ServiceModel:
    """The service times this real run actually saw: the durations of its batches by size
    (sizes with at least `least` batches; the others from the nearest size below, scaled as
    the calibration says). Pauses and arrivals are in those durations already, so their
    calibrated extras are left out; the sender's lateness is kept."""
    dur = rec.batch_end - rec.batch_start
    samples = {
        int(n): dur[rec.batch_size == n]
        for n in np.unique(rec.batch_size)
        if (rec.batch_size == n).sum() >= least
    }
    if not samples:
        return service
    return ServiceModel(
        samples, service.context, {}, service.send_late, wake_late=service.wake_late
    )


def replay(schedule: Schedule, policy: BatchPolicy, service: ServiceModel,
           rec: ServeRecords) -> dict[str, float]:  # fmt: skip
    """The schedule simulated on the real run's own clock (one instance): while the real
    engine ran a batch of n that took r times its size's median, it got 1/r of a batch's
    work done per second (a stall: almost none), and between batches it was at full
    speed; a simulated batch of n needs the real run's median for n (the calibration's,
    rescaled, for sizes the run had too few of) and ends when the engine has done that
    much work since it started. So slow stretches and stalls come when the run had them,
    whatever batch the simulation is running then. Everything else as `simulate` does
    it."""
    dur = rec.batch_end - rec.batch_start
    sizes, counts = np.unique(rec.batch_size, return_counts=True)
    real = {int(n): float(np.median(dur[rec.batch_size == n])) for n, c in zip(sizes, counts,
            strict=True) if c >= 10}  # fmt: skip
    level = service_ratio(rec, service)
    need = [0.0] + [real.get(n, service.median(n) * level) for n in range(1, policy.max_batch + 1)]
    nominal = np.asarray([real.get(int(n), service.median(int(n)) * level) for n in rec.batch_size])
    # the engine's work clock: knots at every batch start and end
    times = np.column_stack([rec.batch_start, rec.batch_end]).ravel()
    gaps = np.maximum(0.0, np.r_[0.0, rec.batch_start[1:] - rec.batch_end[:-1]])
    steps = np.column_stack([gaps, nominal]).ravel()  # full speed between batches
    work = np.cumsum(steps)
    rng = np.random.default_rng(11)
    late = Draw(service.send_late)  # by the real run's state at each send
    states = states_at(schedule.times, rec.batch_start, rec.batch_end, policy.instances)
    if PARKED in service.send_late:  # the generator's looks in the real run
        due, sent = rec.scheduled, rec.sent
        look = np.where(sent > due, sent, due + LOOK_S)
        at_once = taken_at_once(rec, policy.max_batch, policy.preferred, policy.delay_s)
        by_record = send_states(due, look, rec, policy.instances, at_once)
        states = by_record[np.argsort(due, kind="stable")]  # the schedule's order
    arrive = schedule.times + (late.many(rng, states) if late else 0.0)
    order = np.argsort(arrive, kind="stable")
    arrivals = Schedule(arrive[order], schedule.keys[order], None)
    svc = ServiceDraws(service, policy.max_batch, rng.random(DRAWS).tolist())

    def took(k: int, _b: int, t: float, _drawn: float, _idle: float) -> float:
        return max(1e-7, _at(_at(t, times, work) + need[k], work, times) - t)

    svc.adjust = took
    out = fifo_loop(arrivals, policy, svc)
    out.scheduled = schedule.times[order].copy()
    return summarize(out, WARMUP_S)["latency_ms"]


def _at(x: float, xs: np.ndarray, ys: np.ndarray) -> float:
    """Piecewise-linear y(x) through the knots, slope 1 beyond them (full speed)."""
    if x <= xs[0]:
        return float(ys[0] - (xs[0] - x))
    if x >= xs[-1]:
        return float(ys[-1] + (x - xs[-1]))
    return float(np.interp(x, xs, ys))


def service_ratio(rec: ServeRecords, service: ServiceModel) -> float:
    """Real batch durations against the calibration's medians for their sizes: the ratio
    of the sums (1.1: the run's batches took 10% longer than calibrated)."""
    return service.speed_ratio(rec.batch_size, rec.batch_end - rec.batch_start)


def busy_share(rec: ServeRecords, since_s: float) -> float:
    """The share of the time after `since_s` the (single) instance spent running batches."""
    keep = rec.batch_start >= since_s
    span = float(rec.batch_end[keep].max() - rec.batch_start[keep].min())
    return float((rec.batch_end - rec.batch_start)[keep].sum() / span) if span > 0 else 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--delay-ms", type=float, default=2.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench/results/serve_sim_vs_real.md"))
    args = ap.parse_args()
    policy = BatchPolicy(max_batch=args.max_batch, delay_ms=args.delay_ms)
    lines = [
        f"# Simulator vs real serving loop ({time.strftime('%Y-%m-%d')})",
        "",
        f"max batch {policy.max_batch}, queue delay {policy.delay_ms:g} ms, 1 instance; "
        f"{args.seconds:g} s of traffic per row (the first {WARMUP_S:g} s served, not "
        "counted), the same seeded schedule served and simulated. Latency end to end "
        "from each request's scheduled time. "
        "Goal: p50 within 10%, p99 within 15%.",
        "",
        "| model | pattern | load | requests | busy | svc | real p50 (range) | sim p50 | Δ p50 "
        "| real p99 (range) | sim p99 | Δ p99 | within | sim in-run Δ p50 | Δ p99 "
        "| on the run's clock Δ p50 | Δ p99 |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    within: list[bool] = []
    in_run: list[bool] = []
    clocked_ok: list[bool] = []
    for model in MODELS:
        prepared, serving, context = serving_for(model, policy)
        service = calibrated(serving, context)
        capacity = service.capacity(policy.max_batch)
        for load in LOADS:
            for name, spec in patterns(load * capacity).items():
                # calibrated again just before its real runs: this machine's speed drifts
                # by 10-20% over minutes, and a simulator is only as good as its calibration
                service = calibrated(serving, context)
                schedule = make_schedule(parse_traffic(spec), args.seconds, seed=11)
                runs, oracles, busy, svc, clocked_runs = [], [], [], [], []
                for _ in range(args.repeats):
                    loop = ServingLoop(serving.run_batch, serving.request_feeds, schedule, policy)
                    for _ in loop.run():
                        pass
                    rec = loop.records()
                    runs.append(summarize(rec, WARMUP_S)["latency_ms"])
                    busy.append(busy_share(rec, WARMUP_S))
                    svc.append(service_ratio(rec, service))
                    oracle = simulate(schedule, policy, in_run_model(rec, service), seed=11)
                    oracles.append(summarize(oracle, WARMUP_S)["latency_ms"])
                    clocked = replay(schedule, policy, service, rec)
                    clocked_runs.append(
                        (clocked["p50"] / runs[-1]["p50"], clocked["p99"] / runs[-1]["p99"])
                    )
                sim = summarize(simulate(schedule, policy, service, seed=11), WARMUP_S)
                sim = sim["latency_ms"]
                p50s = sorted(r["p50"] for r in runs)
                p99s = sorted(r["p99"] for r in runs)
                r50, r99 = statistics.median(p50s), statistics.median(p99s)
                d50, d99 = sim["p50"] / r50 - 1, sim["p99"] / r99 - 1
                o50 = statistics.median(o["p50"] for o in oracles) / r50 - 1
                o99 = statistics.median(o["p99"] for o in oracles) / r99 - 1
                ok = abs(d50) <= 0.10 and abs(d99) <= 0.15
                within.append(ok)
                in_run.append(abs(o50) <= 0.10 and abs(o99) <= 0.15)
                c50 = statistics.median(x[0] for x in clocked_runs) - 1
                c99 = statistics.median(x[1] for x in clocked_runs) - 1
                clocked_ok.append(abs(c50) <= 0.10 and abs(c99) <= 0.15)
                lines.append(
                    f"| {model} | {name} | {load:.0%} ({load * capacity:.0f}/s) | "
                    f"{len(schedule):,} | {statistics.median(busy):.0%} | "
                    f"{statistics.median(svc):.2f} | {r50:.3f} ({p50s[0]:.2f}-{p50s[-1]:.2f}) | "
                    f"{sim['p50']:.3f} | {d50:+.1%} | {r99:.3f} ({p99s[0]:.1f}-{p99s[-1]:.1f}) | "
                    f"{sim['p99']:.3f} | {d99:+.1%} | {'yes' if ok else 'NO'} | {o50:+.1%} | "
                    f"{o99:+.1%} | {c50:+.1%} | {c99:+.1%} |"
                )
                print(lines[-1], flush=True)
        meds = ", ".join(f"{s}: {service.median(s) * 1e3:.3f} ms" for s in service.sizes)
        lines.append(f"| {model} calibration | medians {meds} | | | | | | | | | | | | | | | |")
        prepared.close()
    lines += [
        "",
        f"{sum(within)} of {len(within)} rows within the goal; with the service "
        f"times each run saw (drawn one by one), {sum(in_run)} of {len(in_run)}; on each "
        f"run's own clock, {sum(clocked_ok)} of {len(clocked_ok)}.",
    ]
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
