"""What the stoppable runs cost a timed inference (#54): every session.run now passes the
process's shared `RunOptions` (whose `terminate` a signal sets), where it passed none.

Interleaved rounds on one session of the demo models: a round of plain `sess.run(None,
feeds)` then a round through `inference_fn` (the timing loop's call), alternating; the
ratio of the median per-run times (stoppable / plain), quiet and beside two busy-loop
processes, with the 1-minute load average (the machine is shared: others' work shows).

Run: .venv/bin/python bench/stoppable_run_cost.py [--out bench/results/stoppable_run_cost.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402

MODELS = ROOT / "resources" / "models"
ROUNDS, RUNS = 30, 100


def measure(model: Path) -> tuple[float, float]:
    """(median ns per plain run, median ns per stoppable run), interleaved."""
    import numpy as np
    import onnxruntime as ort

    from engine.backends.ort.inference_session import (
        OpenSession,
        inference_fn,
        stoppable_session_class,
    )

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = stoppable_session_class()(str(model), so, providers=["CPUExecutionProvider"])
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        kind = np.int64 if "int64" in i.type else np.float32
        feeds[i.name] = np.ones(shape, kind)
    opened = OpenSession(sess, tuple(sess.get_providers()), "CPUExecutionProvider", 0.0)
    stoppable = inference_fn(opened, feeds)
    plain_run = ort.InferenceSession.run

    def plain() -> object:
        return plain_run(sess, None, feeds)

    plain_ns: list[float] = []
    stop_ns: list[float] = []
    for fn in (plain, stoppable):  # warm-up
        for _ in range(20):
            fn()
    for r in range(ROUNDS):
        pair = ((plain, plain_ns), (stoppable, stop_ns))
        for fn, into in pair if r % 2 == 0 else pair[::-1]:
            for _ in range(RUNS):
                t0 = time.perf_counter_ns()
                fn()
                into.append(time.perf_counter_ns() - t0)
    return statistics.median(plain_ns), statistics.median(stop_ns)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "stoppable_run_cost.md"))
    args = ap.parse_args()
    rows = ["| model | load | load1 before | plain p50 µs | stoppable p50 µs | ratio |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    for model in (MODELS / "demo_cnn.onnx", MODELS / "demo_transformer.onnx"):
        for loaded in (False, True):
            busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    for _ in range(2)] if loaded else []  # fmt: skip
            try:
                load1 = os.getloadavg()[0]
                plain, stop = measure(model)
            finally:
                for p in busy:
                    p.kill()
                    p.wait()
            rows.append(
                f"| {model.name} | {'2 busy loops' if loaded else 'as it was'} | {load1:.1f} "
                f"| {plain / 1e3:.1f} | {stop / 1e3:.1f} | {stop / plain:.3f} |"
            )
            print(rows[-1], flush=True)
    head = (
        "# Stoppable runs: cost per timed inference (bench/stoppable_run_cost.py)\n\n"
        f"{ROUNDS} interleaved rounds of {RUNS} runs each way, one intra-op thread, on "
        f"{os.cpu_count()} CPUs of a shared machine (load1: the 1-minute load average, "
        "others' work included). ratio: stoppable / plain median; 1.0 is no cost.\n\n"
    )
    publish(head + "\n".join(rows), args.out)


if __name__ == "__main__":
    main()
