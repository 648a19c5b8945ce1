"""What the stoppable runs cost a timed inference (#54): every session.run now passes the
process's shared `RunOptions` (whose `terminate` a signal sets), where it passed none; and
while a command watches for signals (`interrupt.watch()`, every CLI command) each run
also holds its session until it returns (`interrupt.calling`/`returned`: a list append
and remove per run).

Interleaved rounds on one session of the demo models: a round of plain `sess.run(None,
feeds)`, a round through `inference_fn` (the timing loop's call) with no watch, and a
round through it while `watch()` runs, in rotating order; the ratio of the median per-run
times to plain, quiet and beside two busy-loop processes, with the 1-minute load average
and the share of the 2 CPUs others used during the rows (the machine is shared).

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


def measure(model: Path) -> tuple[float, float, float]:
    """Median ns per plain run, per stoppable run, per stoppable run while a command
    watches for signals; interleaved."""
    import numpy as np
    import onnxruntime as ort

    from engine import interrupt
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
    watched_ns: list[float] = []
    for fn in (plain, stoppable):  # warm-up
        for _ in range(20):
            fn()
    kinds = ((plain, plain_ns, False), (stoppable, stop_ns, False), (stoppable, watched_ns, True))
    for r in range(ROUNDS):
        for fn, into, watching in kinds[r % 3 :] + kinds[: r % 3]:
            if watching:
                interrupt.watch()
            try:
                for _ in range(RUNS):
                    t0 = time.perf_counter_ns()
                    fn()
                    into.append(time.perf_counter_ns() - t0)
            finally:
                if watching:
                    interrupt.unwatch()
    assert not interrupt.let_go_kept(), "a run that returned stayed held"
    return statistics.median(plain_ns), statistics.median(stop_ns), statistics.median(watched_ns)


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def own_ticks() -> int:
    """This process's and its children's CPU jiffies (the busy loops are ours too)."""
    t = os.times()
    used = t.user + t.system + t.children_user + t.children_system
    return round(used * os.sysconf("SC_CLK_TCK"))


def previous_rows(out: Path) -> list[str]:
    """The last result's table rows (kept beside the new one)."""
    if not out.is_file():
        return []
    text = out.read_text().split("## Previous run")[0]
    return [line for line in text.splitlines() if line.startswith("| demo_")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "stoppable_run_cost.md"))
    args = ap.parse_args()
    before = previous_rows(Path(args.out))
    rows = ["| model | load | load1 before | others' CPU (of 2) | plain p50 µs "
            "| stoppable p50 µs | watching p50 µs | ratio | ratio watching |",
            "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for model in (MODELS / "demo_cnn.onnx", MODELS / "demo_transformer.onnx"):
        for loaded in (False, True):
            busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    for _ in range(2)] if loaded else []  # fmt: skip
            try:
                load1 = os.getloadavg()[0]
                (busy0, total0), own0 = cpu_ticks(), own_ticks()
                plain, stop, watched = measure(model)
            finally:
                for p in busy:
                    p.kill()
                    p.wait()
            (busy1, total1), own1 = cpu_ticks(), own_ticks()
            ncpu = os.cpu_count() or 1
            others = max(0, (busy1 - busy0) - (own1 - own0)) / max(1, total1 - total0) * ncpu
            rows.append(
                f"| {model.name} | {'2 busy loops' if loaded else 'as it was'} | {load1:.1f} "
                f"| {others:.2f} | {plain / 1e3:.1f} | {stop / 1e3:.1f} | {watched / 1e3:.1f} "
                f"| {stop / plain:.3f} | {watched / plain:.3f} |"
            )
            print(rows[-1], flush=True)
    head = (
        "# Stoppable runs: cost per timed inference (bench/stoppable_run_cost.py)\n\n"
        f"{ROUNDS} interleaved rounds of {RUNS} runs each way, one intra-op thread, on "
        f"{os.cpu_count()} CPUs of a shared machine (load1: the 1-minute load average, "
        "others' work included; others' CPU: what processes other than this one and its "
        "busy loops used during the row). ratio: stoppable / plain median; ratio watching: "
        "stoppable while a command watches for signals (each run holds its session until "
        "it returns) / plain; 1.0 is no cost.\n\n"
    )
    tail = ""
    if before:
        tail = (
            "\n\n## Previous run (before the per-run hold while watching)\n\n"
            "| model | load | load1 before | plain p50 µs | stoppable p50 µs | ratio |\n"
            "|---|---|---|---|---|---|\n" + "\n".join(before)
        )
    publish(head + "\n".join(rows) + tail, args.out)


if __name__ == "__main__":
    main()
