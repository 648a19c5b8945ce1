"""What reading each run's origin (engine/session/origins.py, format v9) adds to
`SessionReader.runs()`, the call behind every run list (session show, the report, the Runs
dock's file read, Compare): a session of N runs (a third tune trials, a third sweep
points with their sweep rows, a third plain), `runs()` timed against the same rows read
without origins, interleaved, in one process. Prints the ratio and how busy the machine
was (others' CPU from /proc/stat, the load average).

    .venv/bin/python bench/run_origins_cost.py [--runs 3000] [--repeats 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from engine.session import SessionStore, open_session_file
from engine.session.origins import sweep_origin, tune_origin, write_origin
from engine.session.reader import RUNS, run_row


def build(path: Path, n: int) -> None:
    with SessionStore.create_or_open(path) as store:
        conn = store.db.conn
        sweep_ids: list[int] = []
        with store.transaction():
            for i in range(n):
                kind = ("bench", "bench", "profile")[i % 3]
                rid = store.start_run({"kind": kind, "model_path": "/m/model.onnx"})
                store.end_run(rid, "ok", None)
                if i % 3 == 1:
                    write_origin(conn, rid, tune_origin(f"k{i // 300}", i % 300))
                elif i % 3 == 2:
                    write_origin(conn, rid, sweep_origin("batch", i % 8))
                    sweep_ids.append(rid)
        for start in range(0, len(sweep_ids), 8):
            ids = sweep_ids[start : start + 8]
            store.add_sweep(
                model_path="/m/model.onnx",
                dim="batch",
                config={},
                result={"vary": {"dim": "batch", "values": list(range(len(ids)))}, "points": []},
                run_ids=ids,
            )


def cpu_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine."""
    with open("/proc/stat") as fh:
        fields = [float(x) for x in fh.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3000)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "many.opscope"
        build(path, args.runs)
        with open_session_file(path) as reader:
            labels = {r.origin.label.split(",")[0] for r in reader.runs() if r.origin}
            print(f"{args.runs} runs; origins seen: {sorted(labels)[:6]}")

            def plain() -> None:  # the rows alone, as runs() read them before v9
                rows = reader._run_rows("")
                [reader._settled(run_row(RUNS.values(r), reader.path)) for r in rows]

            def with_origins() -> None:
                reader.runs()

            before = (cpu_busy(), os.times())
            t_wall = time.perf_counter()
            old, new = [], []
            for _ in range(args.repeats):  # interleaved: the same load on both
                for fn, out in ((plain, old), (with_origins, new)):
                    t = time.perf_counter()
                    fn()
                    out.append(time.perf_counter() - t)
            wall = time.perf_counter() - t_wall
            (busy0, total0), own0 = before
            busy1, total1 = cpu_busy()
            own1 = os.times()
    cpus = os.cpu_count() or 1
    machine = (busy1 - busy0) / (total1 - total0) * cpus
    own = (own1.user + own1.system - own0.user - own0.system) / wall
    a, b = statistics.median(old), statistics.median(new)
    print(
        f"runs() without origins: median {a * 1e3:.1f} ms; with: {b * 1e3:.1f} ms; "
        f"ratio {b / a:.2f} (n={args.repeats} each, interleaved)"
    )
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(
        f"machine: {machine:.2f} of {cpus} CPUs busy, this process {own:.2f}, others "
        f"{max(0.0, machine - own):.2f}; load average {' '.join(load)}"
    )


if __name__ == "__main__":
    main()
