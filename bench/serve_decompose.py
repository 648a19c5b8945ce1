"""One twin-test row taken apart request by request: where the real serving loop's latency
goes against the simulator's, part by part (median, mean, p90 and p99 over the requests after the
first second): how late the send was, the wait in the queue (the batcher's delay), from
leaving the queue to the batch's start, the batch, and from the batch's end to the response.
The real run and four simulated runs (seeds 11-14) of one seeded schedule, from a
calibration taken just before.
    .venv/bin/python bench/serve_decompose.py MODEL THREADS PATTERN LOAD [--out FILE.md]
    e.g. demo_cnn 1 poisson 0.5 (appends to bench/results/serve_decompose.md)
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

from serve_sim_vs_real import WARMUP_S, calibrated, patterns, serving_for  # noqa: E402

from engine.serve.batching import BatchPolicy  # noqa: E402
from engine.serve.loop import ServingLoop  # noqa: E402
from engine.serve.records import ServeRecords  # noqa: E402
from engine.serve.sim.simulate import simulate  # noqa: E402
from engine.serve.traffic.schedule import make_schedule, parse_traffic  # noqa: E402

PARTS = ("late", "wait", "to start", "batch", "after", "total")


def parts(rec: ServeRecords) -> tuple[dict[str, tuple[float, float]], float]:
    """Each part's (median, mean, p90, p99) in ms, and the mean batch size the requests
    saw."""
    ok = (rec.scheduled >= WARMUP_S) & np.isfinite(rec.done)
    b = rec.batch[ok]
    start, end = rec.batch_start[b], rec.batch_end[b]
    got = {
        "late": rec.sent[ok] - rec.scheduled[ok],
        "wait": rec.dequeued[ok] - rec.sent[ok],
        "to start": start - rec.dequeued[ok],
        "batch": end - start,
        "after": rec.done[ok] - end,
        "total": rec.done[ok] - rec.scheduled[ok],
    }
    out = {
        k: (float(np.median(v)) * 1e3, float(np.mean(v)) * 1e3,
            float(np.percentile(v, 90)) * 1e3, float(np.percentile(v, 99)) * 1e3)
        for k, v in got.items()
    }  # fmt: skip
    return out, float(np.mean(rec.batch_size[b]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("model")
    ap.add_argument("threads", type=int)
    ap.add_argument("pattern", choices=("poisson", "constant", "bursts"))
    ap.add_argument("load", type=float)
    ap.add_argument("--out", default=str(ROOT / "bench/results/serve_decompose.md"))
    args = ap.parse_args()
    policy = BatchPolicy(max_batch=8, delay_ms=2.0)
    prepared, serving, context = serving_for(args.model, policy, args.threads)
    service = calibrated(serving, context)
    spec = patterns(args.load * service.capacity(policy.max_batch))[args.pattern]
    schedule = make_schedule(parse_traffic(spec), 8.0, seed=11)
    loop = ServingLoop(serving.run_batch, serving.request_feeds, schedule, policy)
    for _ in loop.run():
        pass
    real, real_size = parts(loop.records())
    sims = [parts(simulate(schedule, policy, service, seed=11 + k)) for k in range(4)]
    prepared.close()
    sim = {p: tuple(float(np.mean([s[0][p][i] for s in sims])) for i in range(4)) for p in PARTS}
    lines = [
        f"## {args.model}, {args.threads or 'default'} thread(s), {args.pattern} at "
        f"{args.load:.0%} ({time.strftime('%Y-%m-%d %H:%M')} UTC, load average "
        f"{os.getloadavg()[0]:.2f})",
        "",
        f"Mean batch size the requests saw: real {real_size:.2f}, simulated "
        f"{np.mean([s[1] for s in sims]):.2f}. Milliseconds; simulated: the mean of 4 runs.",
        "",
        "| part | real median | simulated median | real mean | simulated mean | real p90 "
        "| simulated p90 | real p99 | simulated p99 |",
        "|---|---|---|---|---|---|---|---|---|",
        *(
            f"| {p} | " + " | ".join(f"{real[p][i]:.3f} | {sim[p][i]:.3f}" for i in range(4)) + " |"
            for p in PARTS
        ),
        "",
    ]
    text = "\n".join(lines)
    print(text)
    out = Path(args.out)
    head = "" if out.exists() else "# Serving latency taken apart, real against simulated\n\n"
    with out.open("a", encoding="utf-8") as f:
        f.write(head + text + "\n")


if __name__ == "__main__":
    main()
