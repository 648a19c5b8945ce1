"""Harness overhead: OpScope's timing loop over the backend's `Prepared.run_once` vs a bare
ONNX Runtime loop over the same session.

Alternates the two in rounds inside one process so machine noise hits both alike, and
reports the throughput ratio (goal >= 0.98). Run: .venv/bin/python bench/harness_overhead.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine import backends  # noqa: E402
from engine.backends.base import PrepareRequest  # noqa: E402
from engine.config import RunConfig  # noqa: E402
from engine.events import TimingDone  # noqa: E402
from engine.model.workload import Workload  # noqa: E402
from engine.run.timing import TimingPlan, time_inferences  # noqa: E402


def bare_loop(run: object, seconds: float) -> float:
    """Inferences per second of the simplest possible loop."""
    n = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while True:
        run()  # type: ignore[operator]
        n += 1
        if time.perf_counter() >= end:
            break
    return n / (time.perf_counter() - t0)


def harness_loop(run: object, seconds: float, batch: int) -> float:
    plan = TimingPlan(warmup_runs=0, warmup_s=0, min_runs=1, duration_s=seconds)
    done = [e for e in time_inferences(run, plan, batch) if isinstance(e, TimingDone)][-1]  # type: ignore[arg-type]
    return done.throughput.inferences_per_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default=str(ROOT / "resources/models/demo_transformer.onnx"))
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args()
    # the backend's own preparation: load, inputs, variant, session
    prepared = backends.prepare(PrepareRequest(Workload(args.model, RunConfig(provider="cpu"))))
    sess, feeds = prepared.opened.session, prepared.feeds  # the same ORT session, bare

    def run() -> None:
        sess.run(None, feeds)

    bare_loop(run, 1.0)  # warm-up
    ratios, bare_all, ours_all = [], [], []
    for r in range(args.rounds):
        if r % 2:
            ours = harness_loop(prepared.run_once, args.seconds, 1)
            bare = bare_loop(run, args.seconds)
        else:
            bare = bare_loop(run, args.seconds)
            ours = harness_loop(prepared.run_once, args.seconds, 1)
        bare_all.append(bare)
        ours_all.append(ours)
        ratios.append(ours / bare)
        print(f"round {r}: bare {bare:8.1f}/s  opscope {ours:8.1f}/s  ratio {ours / bare:.3f}")
    print(
        f"\nmodel {Path(args.model).name}: median ratio {statistics.median(ratios):.3f} "
        f"(total {sum(ours_all) / sum(bare_all):.3f}) over {args.rounds} rounds of "
        f"{args.seconds:g} s; goal >= 0.98"
    )


if __name__ == "__main__":
    main()
