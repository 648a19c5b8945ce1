"""The twin test for the request-serving simulator: is it as close to the real loop as the
real loop is to itself?

Each row serves one seeded schedule on the real serving loop twice and simulates it from a
calibration taken just before the row, in alternating order (even rows: real, simulated,
real; odd rows: simulated, real, real). The simulator's error is against the first real
run; beside it, the second real run's difference from the first: the machine's own repeat
spread, measured in the same minute. The simulation is made three times: service times
drawn one by one; with the calibrated slow-stretch process (engine/serve/slow_stretches.py,
fitted on the windows of batches that agree); and with the same process fitted on every
batch (as before the windows: `pooled`), all from the same calibration. The 1-minute load
average is recorded beside every row.

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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402
from serve_sim_vs_real import WARMUP_S, busy_share, patterns, prepared_for  # noqa: E402

from engine.serve.batching import BatchPolicy  # noqa: E402
from engine.serve.calibration import calibration_context, load_or_calibrate  # noqa: E402
from engine.serve.loop import ServingLoop  # noqa: E402
from engine.serve.records import summarize  # noqa: E402
from engine.serve.service import ServiceModel  # noqa: E402
from engine.serve.setup import prepare_serving  # noqa: E402
from engine.serve.simulate import simulate  # noqa: E402
from engine.serve.slow_stretches import SlowStretches  # noqa: E402
from engine.serve.traffic import make_schedule, parse_traffic  # noqa: E402

MODELS = ("demo_cnn", "demo_transformer")
LOADS = (0.5, 0.85)
P50_GOAL, P99_GOAL = 0.05, 0.10


FITTED: list[Any] = []  # the batch sequences the calibration's fit saw last
_FIT = SlowStretches.fit.__func__  # type: ignore[attr-defined]


def _seen_fit(cls: Any, runs: Any, robust: bool = True) -> Any:
    FITTED[:] = [list(runs)]
    return _FIT(cls, runs, robust)


SlowStretches.fit = classmethod(_seen_fit)  # type: ignore[method-assign,assignment]


def real_run(serving: Any, schedule: Any, policy: BatchPolicy) -> tuple[dict[str, float], float]:
    loop = ServingLoop(serving.run_batch, serving.request_feeds, schedule, policy)
    for _ in loop.run():
        pass
    rec = loop.records()
    return summarize(rec, WARMUP_S)["latency_ms"], busy_share(rec, WARMUP_S)


def err(a: dict[str, float], b: dict[str, float], key: str) -> float:
    return a[key] / b[key] - 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--delay-ms", type=float, default=2.0)
    ap.add_argument("--out", default=str(ROOT / "bench/results/serve_twin.md"))
    args = ap.parse_args()
    policy = BatchPolicy(max_batch=args.max_batch, delay_ms=args.delay_ms)
    started = time.time()
    lines = [
        f"# Twin test: request-serving simulator against the real loop's repeat spread "
        f"({time.strftime('%Y-%m-%d')})",
        "",
        f"max batch {policy.max_batch}, queue delay {policy.delay_ms:g} ms, 1 instance; "
        f"{args.seconds:g} s of traffic per run (the first {WARMUP_S:g} s served, not "
        "counted). Latency from each request's scheduled time. `repeat`: the second real "
        "run against the first; `sim`: service times drawn one by one; `+stretches`: "
        "with the slow-stretch process fitted on the windows that agree; `+pooled`: the "
        "same process fitted on every batch; each against the first real run. `load`: "
        "the 1-minute load average at the row's start.",
        "",
        "| model | pattern | load | order | loadavg | busy | real p50 | real p99 "
        "| repeat Δp50 | repeat Δp99 | sim Δp50 | sim Δp99 | +stretches Δp50 "
        "| +stretches Δp99 | +pooled Δp50 | +pooled Δp99 "
        "| stretches (slow share, mean length, windows left out) | pooled (share, length) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows: list[dict[str, float]] = []
    k = 0
    for model in MODELS:
        prepared = prepared_for(model)
        serving = prepare_serving(prepared, policy, model)
        context = calibration_context(model, prepared.config.to_json(), prepared.provider_used,
                                      policy.max_batch, 1)  # fmt: skip
        for load in LOADS:
            for name, _ in patterns(1.0).items():
                service = next(
                    x
                    for x in load_or_calibrate(serving, context, True)
                    if isinstance(x, ServiceModel)
                )
                spec = patterns(load * service.capacity(policy.max_batch))[name]
                schedule = make_schedule(parse_traffic(spec), args.seconds, seed=11)
                loadavg = os.getloadavg()[0]
                order = ("real", "sim", "real") if k % 2 == 0 else ("sim", "real", "real")
                reals: list[dict[str, float]] = []
                busy: list[float] = []
                sims: dict[str, dict[str, float]] = {}
                pooled = _FIT(SlowStretches, FITTED[0], False) if FITTED else None
                variants = {
                    "sim": (service, False),
                    "str": (service, True),
                    "pool": (dataclasses.replace(service, stretches=pooled), True),
                }
                for step in order:
                    if step == "real":
                        lat, b = real_run(serving, schedule, policy)
                        reals.append(lat)
                        busy.append(b)
                    else:
                        for key, (svc, stretched) in variants.items():
                            rec = simulate(schedule, policy, svc, seed=11,
                                           slow_stretches=stretched)  # fmt: skip
                            sims[key] = summarize(rec, WARMUP_S)["latency_ms"]
                first, second = reals
                st = service.stretches
                row = {
                    "rep50": err(second, first, "p50"),
                    "rep99": err(second, first, "p99"),
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
                    f"| {loadavg:.2f} | {statistics.mean(busy):.0%} | {first['p50']:.3f} "
                    f"| {first['p99']:.3f} | {row['rep50']:+.1%} | {row['rep99']:+.1%} "
                    f"| {row['sim50']:+.1%} | {row['sim99']:+.1%} | {row['str50']:+.1%} "
                    f"| {row['str99']:+.1%} | {row['pool50']:+.1%} | {row['pool99']:+.1%} | "
                    + (
                        f"{st.slow_share:.1%}, {st.mean_stretch:.1f}, {st.left_out} of "
                        f"{st.windows} |"
                        if st
                        else "none |"
                    )
                    + (
                        f" {pooled.slow_share:.1%}, {pooled.mean_stretch:.1f} |"
                        if pooled
                        else " none |"
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
        f"| simulator, one by one | {med('sim50'):.1%} | {med('sim99'):.1%} "
        f"| {share('sim50', 'sim99')} |",
        f"| simulator, slow stretches | {med('str50'):.1%} | {med('str99'):.1%} "
        f"| {share('str50', 'str99')} |",
        f"| simulator, slow stretches pooled (before) | {med('pool50'):.1%} "
        f"| {med('pool99'):.1%} | {share('pool50', 'pool99')} |",
        "",
        f"Load average over the rows: {min(r['loadavg'] for r in rows):.2f} to "
        f"{max(r['loadavg'] for r in rows):.2f}. Took {time.time() - started:.0f} s.",
    ]
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
