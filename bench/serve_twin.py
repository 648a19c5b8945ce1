"""The twin test for the request-serving simulator: is it as close to the real loop as the
real loop is to itself?

Each row serves one seeded schedule on the real serving loop twice and simulates it from a
calibration taken just before the row, in alternating order (even rows: real, simulated,
real; odd rows: simulated, real, real). The simulator's error is against the first real
run; beside it, the second real run's difference from the first: the machine's own repeat
spread, measured in the same minute. The simulation is made three times: service times
drawn one by one, once (seed 11, as runs 1-4 did); drawn one by one `--draws` times (seeds
11, 12, ...), the p50 and p99 the mean of theirs; and with the calibrated slow-stretch
process (engine/serve/sim/slow_stretches.py), also the mean of `--draws`; and (`pooled`) one by
one from one pool of ratios to each size's median, every size's batches together, also the
mean of `--draws`. One simulated run of
the row's 8 s is as noisy as one real run (its p99 rests on some 20 requests): against a
real run it differs by about the real loop's own repeat spread even when it is right on
average, so it meets goal 1 about half the time by chance. The mean of several draws is
the simulator's estimate of what an 8-s run's p50 and p99 are on average: what a prediction
is. The 1-minute load average is recorded beside every row.

Goals (issue 28): the simulator's median error over the rows no larger than the real loop's
own median repeat difference; on a quiet machine, p50 within 5% and p99 within 10% in at
least 90% of rows. Run:
    .venv/bin/python bench/serve_twin.py [--seconds 8] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402
from serve_sim_vs_real import (  # noqa: E402
    WARMUP_S,
    busy_share,
    calibrated,
    patterns,
    serving_for,
)

from engine.serve.batching import BatchPolicy  # noqa: E402
from engine.serve.loop import ServingLoop  # noqa: E402
from engine.serve.records import summarize  # noqa: E402
from engine.serve.sim.service import ServiceModel  # noqa: E402
from engine.serve.sim.simulate import simulate  # noqa: E402
from engine.serve.sim.slow_stretches import MAX_RATIOS  # noqa: E402
from engine.serve.traffic.schedule import make_schedule, parse_traffic  # noqa: E402

MODELS = ("demo_cnn", "demo_transformer")
LOADS = (0.5, 0.85)
P50_GOAL, P99_GOAL = 0.05, 0.10


def real_run(
    serving: Any, schedule: Any, policy: BatchPolicy, service: ServiceModel
) -> tuple[dict[str, float], float, float]:
    """The run's p50 and p99 (ms), its busy share, and its batches' time against the
    calibration's means for their sizes (1.1: 10% slower than timed back to back)."""
    loop = ServingLoop(serving.run_batch, serving.request_feeds, schedule, policy)
    for _ in loop.run():
        pass
    rec = loop.records()
    keep = rec.batch_start >= WARMUP_S
    sizes, counts = np.unique(rec.batch_size[keep], return_counts=True)
    table = service.table(policy.max_batch)  # what the simulator draws from, by size
    expected = sum(
        float(np.mean(table[int(n)])) * int(c) for n, c in zip(sizes, counts, strict=True)
    )
    ratio = float(np.sum((rec.batch_end - rec.batch_start)[keep])) / expected
    return summarize(rec, WARMUP_S)["latency_ms"], busy_share(rec, WARMUP_S), ratio


def simulated(schedule: Any, policy: BatchPolicy, service: ServiceModel, draws: int,
              stretched: bool) -> dict[str, float]:  # fmt: skip
    """The p50 and p99 (ms) of the schedule simulated `draws` times (seeds 11, 12, ...):
    the mean of each run's; `busy`, the mean busy share."""
    recs = [simulate(schedule, policy, service, seed=11 + k, slow_stretches=stretched)
            for k in range(draws)]  # fmt: skip
    runs = [summarize(rec, WARMUP_S)["latency_ms"] for rec in recs]
    out = {q: statistics.mean(r[q] for r in runs) for q in ("p50", "p99")}
    out["busy"] = statistics.mean(busy_share(rec, WARMUP_S) for rec in recs)
    return out


def pooled_ratios(service: ServiceModel) -> ServiceModel:
    """Every size's batches drawn from one pool of ratios to the size's median (every size's
    back-to-back batches: the slow-stretch fit's two pools together) instead of the size's
    own 40-190 batches, whose tail rests on one or two of them."""
    st = service.stretches
    if st is None or max(st.normal.size, st.slow.size) >= MAX_RATIOS:  # pools cut: skewed
        return service
    ratios = np.concatenate([st.normal, st.slow])
    return dataclasses.replace(
        service, samples={n: service.median(n) * ratios for n in service.sizes}
    )


def err(a: dict[str, float], b: dict[str, float], key: str) -> float:
    return a[key] / b[key] - 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--delay-ms", type=float, default=2.0)
    ap.add_argument("--draws", type=int, default=8, help="simulated runs averaged per row")
    ap.add_argument(
        "--threads", type=int, default=0, help="the engine's intra-op threads (0: one a core)"
    )
    ap.add_argument("--out", default=str(ROOT / "bench/results/serve_twin.md"))
    args = ap.parse_args()
    policy = BatchPolicy(max_batch=args.max_batch, delay_ms=args.delay_ms)
    started = time.time()
    lines = [
        f"# Twin test: request-serving simulator against the real loop's repeat spread "
        f"({time.strftime('%Y-%m-%d')})",
        "",
        f"max batch {policy.max_batch}, queue delay {policy.delay_ms:g} ms, 1 instance, "
        f"{args.threads or 'default'} intra-op thread(s); "
        f"{args.seconds:g} s of traffic per run (the first {WARMUP_S:g} s served, not "
        "counted). Latency from each request's scheduled time. `repeat`: the second real "
        "run against the first; `sim 1`: service times drawn one by one, one simulated "
        f"run; `sim {args.draws}`: the mean p50 and p99 of {args.draws} simulated runs "
        f"(seeds 11-{10 + args.draws}); `+stretches`: the same with the slow-stretch "
        "process; `pooled`: one by one from every size's ratios pooled; each against the "
        "first real run. `loadavg`: the 1-minute load average "
        "at the row's start. `busy`: the real runs' busy share (mean of two); `sim busy`: "
        f"the mean of {args.draws} simulated runs'; `svc`: the real runs' batch times "
        "against the row's calibration means for their sizes (mean of two; 1.10: 10% "
        "slower than timed back to back).",
        "",
        "| model | pattern | load | order | loadavg | busy | sim busy | svc | real p50 "
        "| real p99 "
        f"| repeat Δp50 | repeat Δp99 | sim 1 Δp50 | sim 1 Δp99 | sim {args.draws} Δp50 "
        f"| sim {args.draws} Δp99 | +stretches Δp50 | +stretches Δp99 | pooled Δp50 "
        "| pooled Δp99 | stretches (slow share, mean length, windows left out) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows: list[dict[str, float]] = []
    k = 0
    for model in MODELS:
        prepared, serving, context = serving_for(model, policy, args.threads)
        for load in LOADS:
            for name, _ in patterns(1.0).items():
                service = calibrated(serving, context)
                spec = patterns(load * service.capacity(policy.max_batch))[name]
                schedule = make_schedule(parse_traffic(spec), args.seconds, seed=11)
                loadavg = os.getloadavg()[0]
                order = ("real", "sim", "real") if k % 2 == 0 else ("sim", "real", "real")
                reals: list[dict[str, float]] = []
                busy: list[float] = []
                ratios: list[float] = []
                sims: dict[str, dict[str, float]] = {}
                variants = {"one": (service, 1, False), "sim": (service, args.draws, False),
                            "str": (service, args.draws, True),
                            "pool": (pooled_ratios(service), args.draws, False)}  # fmt: skip
                for step in order:
                    if step == "real":
                        lat, b, ratio = real_run(serving, schedule, policy, service)
                        reals.append(lat)
                        busy.append(b)
                        ratios.append(ratio)
                    else:
                        for key, (svc, draws, stretched) in variants.items():
                            sims[key] = simulated(schedule, policy, svc, draws, stretched)
                first, second = reals
                st = service.stretches
                row = {
                    "rep50": err(second, first, "p50"),
                    "rep99": err(second, first, "p99"),
                    "one50": err(sims["one"], first, "p50"),
                    "one99": err(sims["one"], first, "p99"),
                    "sim50": err(sims["sim"], first, "p50"),
                    "sim99": err(sims["sim"], first, "p99"),
                    "str50": err(sims["str"], first, "p50"),
                    "str99": err(sims["str"], first, "p99"),
                    "pool50": err(sims["pool"], first, "p50"),
                    "pool99": err(sims["pool"], first, "p99"),
                    "loadavg": loadavg,
                }
                rows.append(row)
                lines.append(
                    f"| {model} | {name} | {load:.0%} | {'R S R' if k % 2 == 0 else 'S R R'} "
                    f"| {loadavg:.2f} | {statistics.mean(busy):.0%} | {sims['sim']['busy']:.0%} "
                    f"| {statistics.mean(ratios):.3f} | {first['p50']:.3f} "
                    f"| {first['p99']:.3f} | {row['rep50']:+.1%} | {row['rep99']:+.1%} "
                    f"| {row['one50']:+.1%} | {row['one99']:+.1%} "
                    f"| {row['sim50']:+.1%} | {row['sim99']:+.1%} | {row['str50']:+.1%} "
                    f"| {row['str99']:+.1%} | {row['pool50']:+.1%} | {row['pool99']:+.1%} | "
                    + (
                        f"{st.slow_share:.1%}, {st.mean_stretch:.1f}, {st.left_out} of "
                        f"{st.windows} |"
                        if st
                        else "none |"
                    )
                )
                print(lines[-1], flush=True)
                k += 1
        prepared.close()

    def med(key: str) -> float:
        return statistics.median(abs(r[key]) for r in rows)

    def share(k50: str, k99: str) -> str:
        ok = sum(abs(r[k50]) <= P50_GOAL and abs(r[k99]) <= P99_GOAL for r in rows)
        return f"{ok} of {len(rows)}"

    lines += [
        "",
        "| | median abs Δp50 | median abs Δp99 | rows with p50 within 5% and p99 within 10% |",
        "|---|---|---|---|",
        f"| real loop, repeat | {med('rep50'):.1%} | {med('rep99'):.1%} "
        f"| {share('rep50', 'rep99')} |",
        f"| simulator, one by one, one run | {med('one50'):.1%} | {med('one99'):.1%} "
        f"| {share('one50', 'one99')} |",
        f"| simulator, one by one, mean of {args.draws} | {med('sim50'):.1%} "
        f"| {med('sim99'):.1%} | {share('sim50', 'sim99')} |",
        f"| simulator, slow stretches, mean of {args.draws} | {med('str50'):.1%} "
        f"| {med('str99'):.1%} | {share('str50', 'str99')} |",
        f"| simulator, pooled ratios, mean of {args.draws} | {med('pool50'):.1%} "
        f"| {med('pool99'):.1%} | {share('pool50', 'pool99')} |",
        "",
        f"Load average over the rows: {min(r['loadavg'] for r in rows):.2f} to "
        f"{max(r['loadavg'] for r in rows):.2f}. Took {time.time() - started:.0f} s.",
    ]
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
