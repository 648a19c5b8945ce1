"""What a job of `run_isolated` (engine/run/isolated.py) costs to start, spawned (a fresh
interpreter, as before) and warm (forked from this process's fork server, its imports done,
engine/run/job_start.py), side by side: a tune's trial (a 0.5-s bench run recorded in a
session, engine/tune/trial.py) and the memory probe (engine/run/memory_request.py), on each
model, on the machine as found and beside 2 busy loops per CPU started here.

Each measurement: the job's wall seconds from `run_isolated`'s call to its return, and its
process's CPU-seconds (a spawned job's from this process's reaped children, a forked one's
from the server's). "warm": the server running, done importing (a tune's second trial on);
"cold": the server started for this job (a one-off command that would start one); "spawn":
as before. Within a row the starts alternate (spawn, warm, cold; then cold, warm, spawn).
Others' CPU use over each row (the machine's busy time less this process tree's, the busy
loops included in the tree) is given with the load average.

    .venv/bin/python bench/job_start_cost.py [--repeats N] [--json OUT] [MODEL...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
MODELS = (
    str(ROOT / "resources" / "models" / "demo_transformer.onnx"),
    str(Path.home() / ".cache" / "opscope-bench" / "minilm" / "model.onnx"),
)
TIMEOUT_S = 600.0
TRIAL_S = 0.5
BUSY = "while True: pass"


def noop_job() -> Generator[Any, None, None]:
    return None
    yield


def _children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


def _own_tree_cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _server() -> Any:
    import psutil

    for p in psutil.Process().children():
        if "multiprocessing.forkserver" in " ".join(p.cmdline()):
            return p
    return None


def _server_children_cpu() -> float:
    s = _server()
    if s is None:
        return 0.0
    c = s.cpu_times()
    return float(c.children_user + c.children_system)


def _stop_server() -> float:
    """Stop this process's fork server (reaped here: its CPU and its jobs' land in this
    process's children); its own CPU-seconds before it stopped."""
    from multiprocessing import forkserver

    s = _server()
    own = 0.0
    if s is not None:
        c = s.cpu_times()
        own = float(c.user + c.system)
    forkserver._forkserver._stop()  # type: ignore[attr-defined]  # the stdlib's tests' way
    return own


def _server_ready() -> None:
    from bench.job_start_cost import noop_job as job  # by its module's name, not __main__'s
    from engine.run.isolated import run_isolated

    run_isolated(job, (), TIMEOUT_S, start="warm")


def _jobs(model: str, session: str) -> dict[str, tuple[Any, tuple[Any, ...]]]:
    """The trial and the probe on `model`, as their callers start them."""
    from engine import backends
    from engine.backends.genai.backend import DEFAULT_PROMPT
    from engine.backends.genai.kv_dims import decoder_shapes
    from engine.config import RunConfig
    from engine.model.info import load_model
    from engine.model.inputs import generate_inputs, plan_inputs
    from engine.model.workload import Workload
    from engine.tune.trial import TrialRequest, trial_job

    config = RunConfig(threads=1).resolved()
    work = Workload(model, config)
    trial = TrialRequest(work, TRIAL_S, session)
    onnx_model, info = load_model(model)
    dims, shapes = decoder_shapes(info, config.batch, DEFAULT_PROMPT, {}, {})
    plan = plan_inputs(info, config.batch, shapes, dims)
    feeds = generate_inputs(onnx_model, info, plan, 0)
    probe = backends.memory_probe(config.engine)
    return {"trial": (trial_job, (trial,)), "probe": (probe, (model, config, feeds, 10))}


def _one(start: str, job: Any, args: tuple[Any, ...]) -> dict[str, Any]:
    from engine.run.isolated import run_isolated

    server_cpu = 0.0
    if start == "cold":
        _stop_server()
        mode = "warm"
    else:
        mode = start
    before_spawn, before_fork = _children_cpu(), _server_children_cpu()
    t0 = time.perf_counter()
    ended = run_isolated(job, args, TIMEOUT_S, start=mode)
    wall = time.perf_counter() - t0
    if ended.status != "done":
        raise SystemExit(f"job_start_cost: a {start} job ended {ended.status}: {ended.error}")
    if mode == "spawn":
        cpu = _children_cpu() - before_spawn
    else:
        cpu = _server_children_cpu() - before_fork
        if start == "cold":
            s = _server()
            c = s.cpu_times()
            server_cpu = float(c.user + c.system)
    return {"start": start, "wall_s": wall, "cpu_s": cpu, "server_cpu_s": server_cpu}


def _busy_s(t: Any) -> float:
    """The machine's CPU-seconds not idle (all CPUs) in psutil's cpu_times."""
    fields = ("user", "system", "nice", "irq", "softirq", "steal")
    return float(sum(getattr(t, f, 0.0) for f in fields))


def _busy(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(n)]


def row(model: str, kind: str, busy: int, repeats: int) -> dict[str, Any]:
    import psutil

    session = os.path.join(tempfile.mkdtemp(prefix="job-start-cost-"), "t.opscope")
    job, args = _jobs(model, session)[kind]
    _server_ready()  # as from a tune's second trial on
    loops = _busy(busy)
    cpu0, tree0, t0 = psutil.cpu_times(), _own_tree_cpu(), time.monotonic()
    got: list[dict[str, Any]] = []
    try:
        for r in range(repeats):
            order = ("spawn", "warm", "cold") if r % 2 == 0 else ("cold", "warm", "spawn")
            for start in order:
                got.append(_one(start, job, args))
                print(f"  {Path(model).name} {kind} busy={busy} {got[-1]}", flush=True)
    finally:
        for p in loops:
            p.kill()
        for p in loops:
            p.wait()
        _stop_server()  # reaped: its CPU joins this process tree's
    wall = time.monotonic() - t0
    cpu1 = psutil.cpu_times()
    busy_s = _busy_s(cpu1) - _busy_s(cpu0)
    ours = _own_tree_cpu() - tree0
    return {
        "model": model,
        "job": kind,
        "busy_loops": busy,
        "others_cpu": max(0.0, (busy_s - ours) / wall),
        "load": os.getloadavg()[0],
        "row_s": wall,
        "jobs": got,
    }


def _cell(jobs: list[dict[str, Any]], start: str) -> str:
    mine = [j for j in jobs if j["start"] == start]
    cells = []
    for j in mine:
        extra = f" + server {j['server_cpu_s']:.2f}" if start == "cold" else ""
        cells.append(f"{j['wall_s']:.1f} ({j['cpu_s']:.2f}{extra})")
    return ", ".join(cells)


def _median(jobs: list[dict[str, Any]], start: str, key: str) -> float:
    return statistics.median(j[key] for j in jobs if j["start"] == start)


def table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| model | job | load | others' CPU (load avg) | spawn: wall s (job CPU-s) "
        "| warm: wall s (job CPU-s) | cold: wall s (job CPU-s + server's) "
        "| spawn / warm wall | spawn - warm CPU-s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        j = r["jobs"]
        ratio = _median(j, "spawn", "wall_s") / _median(j, "warm", "wall_s")
        saved = _median(j, "spawn", "cpu_s") - _median(j, "warm", "cpu_s")
        load = "as found" if not r["busy_loops"] else f"+{r['busy_loops'] // 2} busy loops per CPU"
        out.append(
            f"| {Path(r['model']).parent.name}/{Path(r['model']).name} | {r['job']} | {load} "
            f"| {r['others_cpu']:.2f} ({r['load']:.1f}) | {_cell(j, 'spawn')} "
            f"| {_cell(j, 'warm')} | {_cell(j, 'cold')} | {ratio:.1f} | {saved:.2f} |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", default=list(MODELS))
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--jobs", default="trial,probe")
    ap.add_argument("--json", help="the measurements, as JSON, to this file")
    args = ap.parse_args()
    for m in args.models:
        if not Path(m).is_file():
            raise SystemExit(f"job_start_cost: {m}: no such model file")
    cpus = os.cpu_count() or 1
    rows = []
    for busy in (0, 2 * cpus):
        for model in args.models:
            for kind in args.jobs.split(","):
                rows.append(row(model, kind, busy, args.repeats))
                if args.json:
                    Path(args.json).write_text(json.dumps(rows, indent=1))
    print(table(rows))


if __name__ == "__main__":
    main()
