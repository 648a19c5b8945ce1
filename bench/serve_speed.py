"""The serving lab's own costs: simulator speed (requests simulated per second of wall
time), traffic generator accuracy (lateness of sends at 1k and 5k requests/s against a
server that answers at once), and the serving loop's overhead at saturation (open-loop
traffic beyond capacity with max batch N, and a closed loop for contrast, against `opscope
bench --batch N`'s timing loop, interleaved). Run:
    .venv/bin/python bench/serve_speed.py [--out bench/results/serve_speed.md]
    .venv/bin/python bench/serve_speed.py --sim-only  # rewrites only the simulator table
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from results_file import publish  # noqa: E402

from engine import backends  # noqa: E402
from engine.backends.base import PrepareRequest  # noqa: E402
from engine.config import RunConfig  # noqa: E402
from engine.events import TimingDone  # noqa: E402
from engine.model.workload import Workload  # noqa: E402
from engine.run.timing import TimingPlan, time_inferences  # noqa: E402
from engine.serve.batching import BatchPolicy  # noqa: E402
from engine.serve.loop import ServingLoop  # noqa: E402
from engine.serve.records import summarize  # noqa: E402
from engine.serve.setup import prepare_serving  # noqa: E402
from engine.serve.sim.service import ServiceModel  # noqa: E402
from engine.serve.sim.simulate import simulate  # noqa: E402
from engine.serve.traffic.schedule import make_schedule, parse_traffic  # noqa: E402


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def sim_speed(lines: list[str]) -> None:
    rng = np.random.default_rng(0)
    svc = ServiceModel({1: rng.gamma(4, 0.25e-3, 500), 8: rng.gamma(4, 0.6e-3, 500)}, {})
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines += [
        "## Simulator speed",
        "",
        f"{time.strftime('%Y-%m-%d')}, {cpu_model()}, {os.cpu_count()} CPUs, "
        f"load average {load:.2f} before the run; schedules are made outside the timing.",
        "",
        "| case | requests | wall s | requests/s |",
        "|---|---|---|---|",
    ]
    cases = {
        "max batch 1, poisson 70%": (BatchPolicy(), "poisson:700", 0),
        "max batch 8, delay 1 ms, bursts": (
            BatchPolicy(max_batch=8, delay_ms=1.0), "bursts:1000,4000,2,0.2", 0),
        "max batch 8, 2 instances, cache 10k": (
            BatchPolicy(max_batch=8, delay_ms=1.0, instances=2), "poisson:2000", 10_000),
    }  # fmt: skip
    for name, (policy, spec, cache) in cases.items():
        sched = make_schedule(parse_traffic(spec), 0, seed=1, repeat=0.2, requests=1_000_000)
        t0 = time.perf_counter()
        simulate(sched, policy, svc, cache_size=cache)
        wall = time.perf_counter() - t0
        lines.append(f"| {name} | {len(sched):,} | {wall:.2f} | {len(sched) / wall:,.0f} |")
        print(lines[-1], flush=True)


def generator_accuracy(lines: list[str]) -> None:
    lines += ["", "## Generator lateness (a server that answers at once)", "",
              "| rate | requests | lateness p50 ms | p99 ms | max ms |",
              "|---|---|---|---|---|"]  # fmt: skip
    for rate in (1000, 5000):
        sched = make_schedule(parse_traffic(f"poisson:{rate}"), 5.0, seed=2)
        loop = ServingLoop(lambda f: None, lambda k: {}, sched, BatchPolicy(max_batch=64))
        for _ in loop.run():
            pass
        rec = loop.records()
        late = (rec.sent - rec.scheduled) * 1e3
        p50, p99 = np.percentile(late, [50, 99])
        lines.append(f"| {rate}/s | {len(rec):,} | {p50:.3f} | {p99:.3f} | {late.max():.3f} |")
        print(lines[-1], flush=True)


def saturated_rate(rec: object, since_s: float) -> float:
    """Requests per second served while traffic still arrived (batches that ended between
    `since_s` and the last send): the instance never waited for work."""
    end, size = rec.batch_end, rec.batch_size  # type: ignore[attr-defined]
    last = float(np.nanmax(rec.sent))  # type: ignore[attr-defined]
    keep = (end >= since_s) & (end <= last)
    ends = np.sort(end[keep])
    if len(ends) < 2:
        return float("nan")
    first = end == ends[0]
    return float(size[keep & ~first].sum() / (ends[-1] - ends[0]))


def loop_overhead(lines: list[str], rounds: int, seconds: float) -> None:
    lines += ["", "## Serving loop at saturation vs the timing loop (demo_cnn, interleaved)", "",
              "Open loop: one traffic thread offering 1.2x what the timing loop served just "
              "before, so the queue never empties; requests per second over the batches that "
              "ended while traffic still arrived (after 0.5 s). Closed loop, for contrast: "
              "2N client threads in the same process, each sending when its reply lands "
              "(that many Python threads contend for the GIL with the instance, which a "
              "real server's remote clients do not).", "",
              "| batch | round | bench samples/s | open loop req/s | ratio | closed loop req/s "
              "| ratio |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    prepared = backends.prepare(
        PrepareRequest(
            Workload(str(ROOT / "resources/models/demo_cnn.onnx"), RunConfig(provider="cpu"))
        )
    )
    for batch in (1, 8):
        serving = prepare_serving(prepared, BatchPolicy(max_batch=batch), "demo_cnn")
        stacked = serving.stacked(batch)
        opens, closeds = [], []
        for r in range(rounds):
            plan = TimingPlan(warmup_runs=5, warmup_s=0.2, min_runs=1, duration_s=seconds)

            def one(feeds: dict[str, np.ndarray] = stacked) -> object:
                return prepared.run_batch(feeds)

            done = [e for e in time_inferences(one, plan, batch) if isinstance(e, TimingDone)][-1]
            bench = done.throughput.samples_per_s
            sched = make_schedule(parse_traffic(f"constant:{1.2 * bench:.1f}"), seconds, seed=1)
            loop = ServingLoop(serving.run_batch, serving.request_feeds, sched, serving.policy)
            for _ in loop.run():
                pass
            opened = saturated_rate(loop.records(), 0.5)
            n = int(bench * seconds * 1.2)
            sched = make_schedule(parse_traffic("constant:1"), 0, requests=n)
            loop = ServingLoop(serving.run_batch, serving.request_feeds, sched, serving.policy,
                               closed_clients=2 * batch, closed_requests=n)  # fmt: skip
            for _ in loop.run():
                pass
            closed = summarize(loop.records(), 0.5)["throughput"]["requests_per_s"]
            opens.append(opened / bench)
            closeds.append(closed / bench)
            lines.append(f"| {batch} | {r} | {bench:.1f} | {opened:.1f} | {opened / bench:.3f} "
                         f"| {closed:.1f} | {closed / bench:.3f} |")  # fmt: skip
            print(lines[-1], flush=True)
        lines.append(f"| {batch} | median | | | {statistics.median(opens):.3f} | "
                     f"| {statistics.median(closeds):.3f} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--out", default=str(ROOT / "bench/results/serve_speed.md"))
    ap.add_argument("--sim-only", action="store_true", help="only the simulator speed, "
                    "replacing its section of --out and keeping the others")  # fmt: skip
    args = ap.parse_args()
    if args.sim_only:
        section: list[str] = []
        sim_speed(section)
        old = Path(args.out).read_text() if Path(args.out).is_file() else ""
        new = "\n".join(section) + "\n"
        text, found = re.subn(
            r"## Simulator speed\n.*?(?=\n## |\Z)", lambda _: new, old, flags=re.S
        )
        publish(text.rstrip("\n") if found else new.rstrip("\n"), args.out)
        return
    lines = [f"# Serving lab costs ({time.strftime('%Y-%m-%d')})", ""]
    sim_speed(lines)
    generator_accuracy(lines)
    loop_overhead(lines, args.rounds, args.seconds)
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
