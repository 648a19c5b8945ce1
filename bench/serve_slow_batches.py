"""Do the real serving loop's slow batches come in runs of batches, or in stretches of time?

The slow-stretch process (engine/serve/sim/slow_stretches.py) counts stretches in batches: a
chance per batch of entering one and of leaving it. A disturbance on a machine lasts some
milliseconds, so counting in time looked the more physical model: a stretch of 7 small
batches (1.3 ms each) would then cover one or two large ones (10 ms), not 7. This bench asks
the real loop: at each load and pattern it serves 8 s of traffic (the first 1 s not
counted) and, for the batches that ran, says how many were slow (over SLOW times their
size's back-to-back median, as the fit counts them), what share of the time they took, and
how long their runs were, in batches and in milliseconds. If stretches lived in time, runs
in ms would hold while runs in batches shrink as batches grow; if slow batches are
isolated events, runs stay near one batch at every batch length.

Run: .venv/bin/python bench/serve_slow_batches.py [--out FILE.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402
from serve_sim_vs_real import WARMUP_S, calibrated, serving_for  # noqa: E402

from engine.serve.batching import BatchPolicy  # noqa: E402
from engine.serve.loop import ServingLoop  # noqa: E402
from engine.serve.sim.slow_stretches import SLOW  # noqa: E402
from engine.serve.traffic.schedule import make_schedule, parse_traffic  # noqa: E402

MODELS = ("demo_cnn", "demo_transformer")
LOADS = (0.3, 0.5, 0.7, 0.85, 0.95)
PATTERNS = ("constant", "poisson")


def slow_runs(slow: np.ndarray, took: np.ndarray) -> tuple[list[int], list[float]]:
    """Each run of consecutive slow batches: its length in batches and in seconds."""
    batches: list[int] = []
    seconds: list[float] = []
    count, spent = 0, 0.0
    for is_slow, t in zip([*slow, False], [*took, 0.0], strict=True):
        if is_slow:
            count, spent = count + 1, spent + t
        elif count:
            batches.append(count)
            seconds.append(spent)
            count, spent = 0, 0.0
    return batches, seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--out", default=str(ROOT / "bench/results/serve_slow_batches.md"))
    args = ap.parse_args()
    policy = BatchPolicy(max_batch=8, delay_ms=2.0)
    started = time.time()
    lines = [
        f"# Slow batches in the real serving loop: runs of batches or stretches of time "
        f"({time.strftime('%Y-%m-%d')})",
        "",
        f"max batch 8, queue delay 2 ms, 1 instance; {args.seconds:g} s of traffic per row "
        f"(the first {WARMUP_S:g} s not counted). A batch is slow over {SLOW}x its size's "
        "back-to-back median (a fresh calibration per model). `runs`: consecutive slow "
        "batches, their mean length in batches and in ms. Below about 50% load the server "
        "idles between batches, and batches after an idle gap run slower (the idle "
        "slowdown the calibration measures apart): those rows' slow batches are that.",
        "",
        "| model | pattern | load | loadavg | batches | mean size | mean batch ms "
        "| slow batches | slow time | runs | mean run (batches) | mean run (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for model in MODELS:
        prepared, serving, context = serving_for(model, policy)
        service = calibrated(serving, context)
        for load in LOADS:
            for pattern in PATTERNS:
                rate = load * service.capacity(policy.max_batch)
                schedule = make_schedule(parse_traffic(f"{pattern}:{rate:.2f}"), args.seconds,
                                         seed=5)  # fmt: skip
                loadavg = os.getloadavg()[0]
                loop = ServingLoop(serving.run_batch, serving.request_feeds, schedule, policy)
                for _ in loop.run():
                    pass
                rec = loop.records()
                order = np.argsort(rec.batch_start, kind="stable")
                start, end = rec.batch_start[order], rec.batch_end[order]
                size = rec.batch_size[order]
                keep = start >= WARMUP_S
                start, end, size = start[keep], end[keep], size[keep]
                took = end - start
                ratio = took / np.asarray([service.median(int(n)) for n in size])
                slow = ratio > SLOW
                batches, seconds = slow_runs(slow, took)
                lines.append(
                    f"| {model} | {pattern} | {load:.0%} | {loadavg:.2f} | {len(took)} "
                    f"| {size.mean():.1f} | {took.mean() * 1e3:.2f} | {slow.mean():.1%} "
                    f"| {took[slow].sum() / (end[-1] - start[0]):.1%} | {len(batches)} "
                    f"| {np.mean(batches) if batches else 0:.2f} "
                    f"| {np.mean(seconds) * 1e3 if seconds else 0:.1f} |"
                )
                print(lines[-1], flush=True)
        prepared.close()
    lines += ["", f"Took {time.time() - started:.0f} s."]
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
