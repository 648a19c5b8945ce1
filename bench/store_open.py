"""Opening a ~100 MB session file and listing its runs (goal: under a second).

Builds the session once in a temporary folder through the real store (raw latency samples,
run statistics, a profiling pass with raw per-node rows, telemetry and markers per run),
then times `open_session_file(path)` + `runs()` + `close()` in this process, reading every
run's latency samples for reference, and `opscope session show FILE` as a fresh process.
Run: .venv/bin/python bench/store_open.py   (results in bench/results/)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402

from engine.config import RunConfig  # noqa: E402
from engine.events import OpProfile, RunEnded, RunStarted, TimingDone  # noqa: E402
from engine.measure.op_stats import coverage, node_stats, op_type_stats  # noqa: E402
from engine.measure.op_trace import NodeEvent, ProfileTrace, RunSpan  # noqa: E402
from engine.measure.stats import is_stable, latency_stats, throughput  # noqa: E402
from engine.session import Recorder, SessionStore, open_session_file  # noqa: E402

BYTES_PER_SAMPLE = 24  # measured: a latency row plus its share of b-tree pages


def synthetic_profile(rng: np.random.Generator, runs: int = 20, nodes: int = 60) -> OpProfile:
    spans, events = [], []
    types = ["Conv", "Relu", "MatMul", "Add", "Softmax", "LayerNormalization"]
    for r in range(runs):
        t = 0.0
        for n in range(nodes):
            dur = float(rng.integers(5, 200))
            events.append(
                NodeEvent(
                    r,
                    f"node_{n}",
                    types[n % len(types)],
                    "CPUExecutionProvider",
                    t,
                    dur,
                    (("float", (1, 64, 32, 32)),),
                    (("float", (1, 64, 32, 32)),),
                    262144,
                    4096,
                    262144,
                )
            )
            t += dur + 1
        spans.append(RunSpan(r, r * 10_000.0, t + 5))
    trace = ProfileTrace(tuple(spans), tuple(events))
    return OpProfile(
        node_stats(trace),
        op_type_stats(trace),
        coverage(trace),
        runs,
        {"CPUExecutionProvider": nodes},
        trace,
    )


def build(path: Path, target_mb: float, runs: int) -> None:
    rng = np.random.default_rng(0)
    per_run = int(target_mb * 1e6 / BYTES_PER_SAMPLE / runs)
    store = SessionStore.create_or_open(path)
    for r in range(runs):
        rec = Recorder(store, model_path="model.onnx")
        config = RunConfig(batch=1 + r % 4, threads=2)
        rec.feed(
            RunStarted(
                config,
                "CPUExecutionProvider",
                "CPUExecutionProvider",
                ("CPUExecutionProvider",),
                {"x": ((1, 3, 64, 64), "float32")},
                1,
                0.05,
            )
        )
        lats = rng.integers(1_000_000, 3_000_000, per_run, dtype=np.int64)
        starts = np.cumsum(lats + 2000) - lats[0]
        store.add_latency(rec.run_id or 0, 0, starts, lats)
        rec.feed(
            TimingDone(
                latency_stats(lats),
                throughput(starts, lats, config.batch),
                is_stable(lats),
                10,
                float(starts[-1] + lats[-1]) / 1e9,
            )
        )
        rec.feed(synthetic_profile(rng))
        now = time.time_ns()
        store.add_telemetry(
            rec.run_id,
            [
                (now + i * 100_000_000, name, float(i % 100))
                for i in range(600)
                for name in ("cpu_percent", "rss_mb", "cpu_freq_mhz")
            ],
        )
        store.add_marker(rec.run_id, "config", config.label())
        rec.feed(RunEnded("ok"))
        rec.close()
    store.close()


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--mb", type=float, default=100.0, help="session size to build")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--drop-caches", action="store_true", help="also time a cold open (Linux, needs root)"
    )
    ap.add_argument("--out", type=Path, default=ROOT / "bench/results/store_open.txt")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="opscope-bench-") as tmp:
        path = Path(tmp) / "big.opscope"
        t0 = time.perf_counter()
        build(path, args.mb, args.runs)
        build_s = time.perf_counter() - t0
        size_mb = path.stat().st_size / 1e6
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            reader = open_session_file(path)
            listed = reader.runs()
            reader.close()
            times.append(time.perf_counter() - t0)
        cold = None
        if args.drop_caches:  # Linux, root: the file's pages leave the OS cache
            os.sync()
            Path("/proc/sys/vm/drop_caches").write_text("3\n")
            t0 = time.perf_counter()
            with open_session_file(path) as reader:
                reader.runs()
            cold = time.perf_counter() - t0
        with open_session_file(path) as reader:
            t0 = time.perf_counter()
            total = sum(reader.latency(r.id)[1].size for r in reader.runs())
            read_all_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "app.entry", "session", "show", str(path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=os.environ.copy(),
        )
        cli_s = time.perf_counter() - t0
        assert proc.returncode == 0, proc.stderr
    lines = [
        f"session of {size_mb:.1f} MB: {len(listed)} runs, {total:,} latency samples "
        f"(built in {build_s:.1f} s)",
        f"open + validate + list runs + close: median {statistics.median(times) * 1e3:.1f} ms, "
        f"max {max(times) * 1e3:.1f} ms over {args.repeat}  (goal < 1000 ms)",
        *(
            [f"the same with a cold OS cache (drop_caches): {cold * 1e3:.1f} ms"]
            if cold is not None
            else []
        ),
        f"read every run's latency samples: {read_all_s:.2f} s "
        f"({total / read_all_s / 1e6:.2f} M samples/s)",
        f"`opscope session show` as a new process (interpreter start included): {cli_s:.2f} s",
    ]
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
