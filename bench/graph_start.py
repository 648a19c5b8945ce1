"""Seconds to the window's first graph drawn with the job's process started warm (forked from
the engine host's fork server, engine/run/job_start.py) and as before (a fresh interpreter,
`OPSCOPE_JOB_START=spawn`), side by side: one after the other, alternating, each in a fresh
process as the window's engine host is, on each model, on the machine as found and beside 2
busy loops per CPU (issue 53: 17-93 s on a busy machine).

Each measurement: the Graph dock's request (GraphRequest, low priority, through the host's
job runner HostJob, no layout cache) to its first GraphSoFar, and that graph drawn by the
window's GraphView (offscreen, Qt already up); with the job process's own CPU-seconds to
that point. "warm": the fork server started and done importing before the request, as the
host starts it once its first latency point is out; "cold": the request starts the server
(a graph asked for before the first latency point); "spawn": as before. Others' CPU use is
measured over each row, with the load average.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/graph_start.py [--repeats N] MODEL...
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TIMEOUT_S = 300.0
STARTS = ("spawn", "warm", "cold")


def noop_job() -> Generator[Any, None, None]:
    """A job that does nothing: its end says the fork server has done its imports."""
    return None
    yield


def _server_ready() -> None:
    """Start the fork server and wait until it has imported its modules (a job forked
    from it ends only then)."""
    from bench.graph_start import noop_job as job  # by its module's name, not __main__'s
    from engine.run import job_start

    job_start.warm()
    ctx = job_start.context()
    parent, child = ctx.Pipe(duplex=False)
    target, args = job_start.start_args(child, job, ())
    proc = ctx.Process(target=target, args=args)
    proc.start()
    child.close()
    proc.join(TIMEOUT_S)
    parent.close()


def one(path: str, start: str) -> dict[str, float]:
    """One measurement in this process (a fresh one per measurement)."""
    import psutil

    from bench.graph_phases import draw_once
    from bench.graph_speed import synthetic_result

    os.environ["OPSCOPE_CACHE_DIR"] = tempfile.mkdtemp(prefix="opscope-graph-start-")
    if start == "spawn":
        os.environ["OPSCOPE_JOB_START"] = "spawn"
    draw_once(synthetic_result(1, 1)[0])  # Qt up and its fonts read, as the window's are
    if start == "warm":
        _server_ready()
    from engine.events import JobUpdate
    from engine.model.workload import Workload
    from engine.run.graph_job import GraphRequest
    from engine.run.host_jobs import HostJob

    first: list[tuple[float, float, Any]] = []
    got, ended = threading.Event(), threading.Event()
    job: list[HostJob] = []

    def put(ev: Any) -> None:
        if isinstance(ev, JobUpdate) and ev.kind == "events":
            for item in ev.payload:
                if type(item).__name__ == "GraphSoFar" and not first:
                    try:
                        t = psutil.Process(job[0].proc.pid).cpu_times()
                        cpu = t.user + t.system
                    except (psutil.Error, IndexError):
                        cpu = float("nan")
                    first.append((time.perf_counter() - t0, cpu, item))
                    got.set()
        elif isinstance(ev, JobUpdate):
            ended.set()
            got.set()

    t0 = time.perf_counter()
    job.append(HostJob(1, GraphRequest(Workload(path), low_priority=True), put))
    got.wait(TIMEOUT_S)
    job[0].cancel()  # the rest of the job is not measured here
    ended.wait(30)
    if not first:
        raise SystemExit(f"{path}: no graph within {TIMEOUT_S:.0f} s ({start})")
    first_s, cpu, item = first[0]
    t1 = time.perf_counter()
    draw_once(item.result)
    return {"first_drawn_s": first_s + time.perf_counter() - t1, "job_cpu_s": cpu}


def rows(models: list[str], repeats: int, loads: tuple[int, ...] = (0, 2)) -> list[str]:
    from engine.measure.contention import ContentionProbe

    lines = [
        "| model | load | others' CPU over the row (load average) | "
        + " | ".join(f"{s}: first graph drawn s (job CPU-s)" for s in STARTS)
        + " | spawn / warm |",
        "|---|---|---|" + "---|" * (len(STARTS) + 1),
    ]
    here = str(Path(__file__).resolve().parents[1])
    for path in models:
        for per_core in loads:
            hogs = [
                subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(per_core * (os.cpu_count() or 1))
            ]
            got: dict[str, list[dict[str, float]]] = {s: [] for s in STARTS}
            probe = ContentionProbe()
            try:
                time.sleep(0.5)
                begin, avg0 = probe.read(), os.getloadavg()[0]
                for rep in range(repeats):
                    order = STARTS if rep % 2 == 0 else STARTS[::-1]
                    for start in order:
                        done = subprocess.run(
                            [sys.executable, "bench/graph_start.py", "--one", start, path],
                            cwd=here,
                            capture_output=True,
                            text=True,
                            timeout=2 * TIMEOUT_S,
                        )
                        if done.returncode != 0:
                            raise SystemExit(done.stderr[-2000:])
                        got[start].append(json.loads(done.stdout.strip().splitlines()[-1]))
                busy = probe.since(begin).others_cpu
                avg = (avg0 + os.getloadavg()[0]) / 2
            finally:
                for p in hogs:
                    p.kill()
                    p.wait()
            cells = [
                ", ".join(f"{m['first_drawn_s']:.1f} ({m['job_cpu_s']:.2f})" for m in got[s])
                for s in STARTS
            ]
            spawn = sum(m["first_drawn_s"] for m in got["spawn"])
            warm = sum(m["first_drawn_s"] for m in got["warm"])
            load = "as found" if not per_core else f"+{per_core} busy loops per CPU"
            lines.append(
                f"| {Path(path).parent.name}/{Path(path).name} | {load} | {busy:.2f} ({avg:.1f}) | "
                + " | ".join(cells)
                + f" | {spawn / warm:.1f} |"
            )
            print(lines[-1], flush=True)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--one", choices=STARTS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.models[0], args.one)))
    else:
        print("\n".join(rows(args.models, args.repeats)))


if __name__ == "__main__":
    main()
