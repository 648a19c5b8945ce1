"""How much a calibration's service times move between repeats, a minute apart at most:
the request simulator's error in the twin test (bench/serve_twin.py, runs 17-18) followed
the row's `svc`, the real runs' batch times against the calibration taken just before the
row, which ranged 0.78-1.17 while the two real runs agreed within a few percent. So the
calibration, not the queue model, is what a row's prediction rests on.

Each repeat times every calibrated size the way a calibration does (engine/serve/sim/service.py:
back to back, at least 40 runs and 0.25 s a size, one size after another), then the same
sizes interleaved in rounds over a longer span (a round: a few batches of each size, the
sizes' samples gathered across the span). Reported per size: the spread over the repeats of
the mean service time (what the simulator's queue feels) and of the median; and the largest
size's mean against a long back-to-back reference timed in the same minute.

`--levels MODEL` prints instead each of `--repeats` sequential calibrations' medians by size
in time order, with `--threads N` (0: the engine's default), to see the speed move between
levels over seconds.
    .venv/bin/python bench/serve_calibration_spread.py [--repeats 6] [--span 2]
    .venv/bin/python bench/serve_calibration_spread.py --levels demo_transformer --threads 1

`--mixed MODEL` times the sizes size after size (60 batches each) and the same batches
shuffled together, three times, and prints each size's median shuffled against in blocks.
    .venv/bin/python bench/serve_calibration_spread.py --mixed demo_transformer --threads 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402
from serve_sim_vs_real import serving_for  # noqa: E402

from engine.serve.batching import BatchPolicy  # noqa: E402
from engine.serve.sim.service import calibration_sizes, time_batches  # noqa: E402

MODELS = ("demo_cnn", "demo_transformer")


def batch_runner(serving: Any) -> tuple[Any, Any]:
    rng = np.random.default_rng(0)
    buffers: dict[int, dict[tuple[str, int], np.ndarray]] = {}

    def make(n: int) -> list[int]:
        return rng.integers(0, 1 << 30, n).tolist()  # type: ignore[no-any-return]

    def run(keys: list[int]) -> object:
        mine = buffers.setdefault(threading.get_ident(), {})
        return serving.run_batch(serving.stack(keys, mine))

    return run, make


def sequential(run: Any, make: Any, sizes: list[int]) -> dict[int, np.ndarray]:
    return {n: time_batches(run, make, n, 40, 0.25, 3, 800) for n in sizes}


def interleaved(run: Any, make: Any, sizes: list[int], span_s: float) -> dict[int, np.ndarray]:
    """Rounds of 5 batches of each size, over `span_s` seconds (3 warm-up batches each)."""
    for n in sizes:
        for _ in range(3):
            run(make(n))
    out: dict[int, list[float]] = {n: [] for n in sizes}
    start = time.perf_counter()
    while time.perf_counter() - start < span_s or min(len(v) for v in out.values()) < 40:
        for n in sizes:
            for _ in range(5):
                t0 = time.perf_counter()
                run(make(n))
                out[n].append(time.perf_counter() - t0)
    return {n: np.asarray(v) for n, v in out.items()}


def levels(model: str, repeats: int, threads: int) -> None:
    policy = BatchPolicy(max_batch=8, delay_ms=2.0)
    prepared, serving, _ = serving_for(model, policy, threads)
    run, make = batch_runner(serving)
    sizes = calibration_sizes(policy.max_batch)
    print(f"{model}, {threads or 'default'} thread(s); median ms by size, load average "
          f"{os.getloadavg()[0]:.2f}")  # fmt: skip
    t0 = time.perf_counter()
    for _ in range(repeats):
        got = sequential(run, make, sizes)
        meds = " ".join(f"{n}: {np.median(got[n]) * 1e3:.3f}" for n in sizes)
        print(f"{time.perf_counter() - t0:6.1f} s  {meds}", flush=True)
    prepared.close()


def mixed(model: str, repeats: int, threads: int) -> None:
    policy = BatchPolicy(max_batch=8, delay_ms=2.0)
    prepared, serving, _ = serving_for(model, policy, threads)
    run, make = batch_runner(serving)
    sizes = calibration_sizes(policy.max_batch)
    rng = np.random.default_rng(0)

    def timed(order: list[int]) -> dict[int, float]:
        out: dict[int, list[float]] = {n: [] for n in sizes}
        for n in order:
            t0 = time.perf_counter()
            run(make(n))
            out[n].append(time.perf_counter() - t0)
        return {n: float(np.median(v)) for n, v in out.items()}

    for n in sizes:
        for _ in range(5):
            run(make(n))
    print(f"{model}, {threads or 'default'} thread(s); median ms in blocks, and shuffled "
          f"against it; load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    for _ in range(repeats):
        blocks = [n for n in sizes for _ in range(60)]
        b, m = timed(blocks), timed([int(x) for x in rng.permutation(blocks)])
        print("  " + "  ".join(f"{n}: {b[n] * 1e3:.3f} {m[n] / b[n] - 1:+.1%}" for n in sizes))
    prepared.close()


def spread(values: list[float]) -> float:
    """(max - min) / median over the repeats."""
    return (max(values) - min(values)) / statistics.median(values)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--span", type=float, default=2.0, help="seconds of the interleaved one")
    ap.add_argument("--out", default=str(ROOT / "bench/results/serve_calibration_spread.md"))
    ap.add_argument("--levels", metavar="MODEL", help="medians by size over time, for MODEL")
    ap.add_argument("--mixed", metavar="MODEL", help="sizes shuffled against in blocks")
    ap.add_argument("--threads", type=int, default=0, help="with --levels, --mixed (0: default)")
    args = ap.parse_args()
    if args.levels:
        levels(args.levels, args.repeats, args.threads)
        return
    if args.mixed:
        mixed(args.mixed, args.repeats, args.threads)
        return
    policy = BatchPolicy(max_batch=8, delay_ms=2.0)
    sizes = calibration_sizes(policy.max_batch)
    started = time.time()
    lines = [
        f"# Calibration spread over repeats ({time.strftime('%Y-%m-%d %H:%M')} UTC)",
        "",
        f"{args.repeats} repeats per model, each: the sequential calibration (sizes one "
        f"after another, >= 40 runs and 0.25 s each), then interleaved (rounds of 5 of each "
        f"size over {args.span:g} s), then a reference: the largest size back to back for "
        f"{2 * args.span:g} s. Spread: (max - min) / median over the repeats. `ref`: the "
        "largest size's mean against the reference's mean in the same repeat, as the "
        "median and the worst over repeats. Load average at the start: "
        f"{os.getloadavg()[0]:.2f}.",
        "",
        "| model | way | s per calibration | spread of the mean by size | spread of the median "
        "by size | largest size's mean / ref: median, worst |",
        "|---|---|---|---|---|---|",
    ]
    for model in MODELS:
        prepared, serving, _ = serving_for(model, policy)
        run, make = batch_runner(serving)
        got: dict[str, list[dict[int, np.ndarray]]] = {"sequential": [], "interleaved": []}
        took: dict[str, list[float]] = {"sequential": [], "interleaved": []}
        refs: list[float] = []
        for _ in range(args.repeats):
            for way in ("sequential", "interleaved"):
                t0 = time.perf_counter()
                s = (sequential(run, make, sizes) if way == "sequential"
                     else interleaved(run, make, sizes, args.span))  # fmt: skip
                took[way].append(time.perf_counter() - t0)
                got[way].append(s)
            ref = time_batches(run, make, sizes[-1], 40, 2 * args.span, 3, 100_000)
            refs.append(float(np.mean(ref)))
        for way, reps in got.items():
            means = {n: [float(np.mean(r[n])) for r in reps] for n in sizes}
            meds = {n: [float(np.median(r[n])) for r in reps] for n in sizes}
            ratio = [float(np.mean(r[sizes[-1]])) / ref for r, ref in zip(reps, refs, strict=True)]
            worst = max(ratio, key=lambda x: abs(x - 1))
            lines.append(
                f"| {model} | {way} | {statistics.median(took[way]):.2f} | "
                + ", ".join(f"{n}: {spread(means[n]):.1%}" for n in sizes)
                + " | "
                + ", ".join(f"{n}: {spread(meds[n]):.1%}" for n in sizes)
                + f" | {statistics.median(ratio):.3f}, {worst:.3f} |"
            )
            print(lines[-1], flush=True)
        prepared.close()
    lines += ["", f"Took {time.time() - started:.0f} s."]
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
