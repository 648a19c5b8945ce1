"""Where the graph job's time goes (issue 53: the Graph dock drew nothing for 55-92 s on a
busy machine), and when the window first draws a graph. `--phases`: each step of the job in
a fresh spawned interpreter, as the window's job runs (start, load, ONNX's shapes, the
symbolic shapes, the layouts, the graph as run; wall and CPU-seconds), the window's drawing
of each view, then the window's path itself (the job through the engine host's job runner,
no layout cache) to its first graph drawn (the graph as loaded, GraphSoFar) and to its whole
result. `--before DIR`: that path with the code checked out in DIR and this checkout's, one
right after the other. Each quiet and beside 2 busy loops per CPU, with others' CPU use and
the load average. Results: bench/results/graph_speed.md.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/graph_phases.py --phases MODEL...
    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/graph_phases.py --before DIR MODEL...

`--first-cpu`: the job's own CPU-seconds from its request to its first graph (GraphSoFar),
each in a fresh process whose imports are done first (as the fork server's are), split into
the model's load (parse, check, hash), ONNX's shape inference and the view (blocks, layouts,
memory), with the job as it is and with the load's checker and file hash left out (what
`load_model(..., check=False, digest=False)` from the graph job would save: neither the
checker's warning nor the hash is read by the graph view), alternating, N times each;
with `--before DIR`, DIR's code (a checkout with the change made) against this checkout's:

    .venv/bin/python bench/graph_phases.py --first-cpu [--repeats N] [--before DIR] MODEL...
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.graph_speed import TIMEOUT_S, others_cpu, synthetic_result

PHASES = (
    ("start", "a fresh interpreter to the graph job's module imported (as the job's child)"),
    ("load", "load_model: the onnx package imported, the file read, checked and hashed"),
    ("shapes", "ONNX's shape inference at the run's shapes (the file's declarations too)"),
    ("symbolic", "ONNX Runtime's symbolic shape inference (its import included)"),
    ("layout loaded", "the graph as loaded made, its blocks found and laid out"),
    ("as run", "the optimized graph: ONNX Runtime imported, the session made, one profiled run"),
    ("layout run", "the graph as run made, its blocks found and laid out"),
)


def _phase_child(path: str, conn: Any, started: float) -> None:
    """A spawned child (a fresh interpreter, as the window's job runs in): each step of the
    graph job in its order, timed (wall, and this process's CPU), on one thread."""
    out: dict[str, tuple[float, float]] = {}
    w0, c0 = started, 0.0

    def mark(name: str) -> None:
        nonlocal w0, c0
        w, c = time.time(), time.process_time()
        out[name] = (w - w0, c - c0)
        w0, c0 = w, c

    from engine.run import graph_job as gj

    mark("start")
    import dataclasses

    from engine import backends
    from engine.model.graph_view import inferred, model_graph
    from engine.model.info import load_model
    from engine.model.inputs import generate_inputs, plan_inputs
    from engine.model.workload import Workload

    config = dataclasses.replace(Workload(path).config.resolved(), threads=1)
    model, info = load_model(path)
    plan = plan_inputs(info, config.batch, {}, {})
    mark("load")
    plain = inferred(model, plan.shapes)
    mark("shapes")
    # as the job: where ONNX's inference left a node output unknown (its import included)
    better = inferred(model, plan.shapes, backends.shape_inference())
    mark("symbolic")
    loaded = model_graph(model, plain if better == plain else better)
    views = {"loaded": gj._view(loaded, {}, False, None)}
    mark("layout loaded")
    lend = backends.graph_as_run(config.engine)
    ran = lend(path, config, generate_inputs(model, info, plan, 0)) if lend else None
    mark("as run")
    if ran is not None and ran.model is not None:
        run_graph = model_graph(ran.model, {**inferred(ran.model, {}), **ran.tensors})
        views["run"] = gj._view(run_graph, ran.providers, False, None)
    mark("layout run")
    conn.send((out, {"views": views, "fused": {}, "model": path}))


def phases(path: str) -> tuple[dict[str, tuple[float, float]], dict[str, tuple[float, float]]]:
    """Where the graph job's time goes on `path`, step by step in a spawned child (wall and
    CPU seconds of each), and the window's drawing of each view (GraphView.set_result)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_phase_child, args=(path, child, time.time()))
    proc.start()
    if not parent.poll(TIMEOUT_S):
        proc.kill()
        raise SystemExit(f"{path}: the phases took over {TIMEOUT_S:.0f} s")
    took, result = parent.recv()
    proc.join()
    drawn = {}
    for key in ("loaded", "run"):
        if key in result["views"]:
            one = {**result, "views": {key: result["views"][key]}}
            t0, c0 = time.perf_counter(), time.process_time()
            draw_once(one)
            drawn[key] = (time.perf_counter() - t0, time.process_time() - c0)
    return took, drawn


def draw_once(result: dict[str, Any]) -> None:
    """The window's GraphView given `result` and painted once (offscreen)."""
    from PySide6.QtWidgets import QApplication

    from widgets.graph_view import GraphView

    app = QApplication.instance() or QApplication([])
    view = GraphView()
    view.resize(1400, 900)
    view.show()
    app.processEvents()
    view.set_result(result)
    view.canvas.viewport().repaint()
    app.processEvents()
    view.close()


def first_drawn(path: str) -> dict[str, float]:
    """The window's path on `path` (the graph job through the engine host's job runner, in a
    spawned child, low priority, no layout cache): seconds from the request to the first
    graph it sends (GraphSoFar: the graph as loaded; None before there was one) and to its
    result, each with the window's drawing of it added."""
    import shutil
    import threading

    from engine.events import JobUpdate
    from engine.model.workload import Workload
    from engine.run.graph_job import GraphRequest
    from engine.run.host_jobs import HostJob

    os.environ["OPSCOPE_CACHE_DIR"] = "/tmp/opscope-graph-bench-cache"
    shutil.rmtree("/tmp/opscope-graph-bench-cache/layouts", ignore_errors=True)
    ended: list[JobUpdate] = []
    first: list[tuple[float, Any]] = []
    done = threading.Event()
    t0 = time.perf_counter()

    def put(ev: Any) -> None:
        if isinstance(ev, JobUpdate) and ev.kind == "events":
            for item in ev.payload:
                if type(item).__name__ == "GraphSoFar" and not first:
                    first.append((time.perf_counter() - t0, item))
        elif isinstance(ev, JobUpdate):
            ended.append(ev)
            done.set()

    HostJob(1, GraphRequest(Workload(path), low_priority=True), put)
    done.wait(TIMEOUT_S)
    end_s = time.perf_counter() - t0
    if not ended or ended[0].kind != "done":
        raise SystemExit(f"{path}: the graph job did not end well: {ended}")
    out = {"result_s": end_s}
    t1 = time.perf_counter()
    draw_once(ended[0].payload)
    out["result_drawn_s"] = end_s + time.perf_counter() - t1
    if first:
        t1 = time.perf_counter()
        draw_once(first[0][1].result)
        out["first_s"] = first[0][0]
        out["first_drawn_s"] = first[0][0] + time.perf_counter() - t1
    return out


def phase_rows(models: list[str], loads: tuple[int, ...] = (0, 2)) -> list[str]:
    """Where the time goes (each step in a fresh child, wall and CPU) and when the window
    first draws a graph, on each model, quiet and beside busy processes per CPU."""
    import subprocess

    names = [name for name, _ in PHASES]
    lines = [
        "| model | load | others' CPU (load average) | "
        + " | ".join(names)
        + " | draw loaded | draw run | first graph drawn | result drawn |",
        "|---|---|---|" + "---|" * (len(names) + 4),
    ]
    draw_once(synthetic_result(1, 1)[0])  # Qt started and its fonts read, as the window's are
    for path in models:
        for per_core in loads:
            hogs = [
                subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(per_core * (os.cpu_count() or 1))
            ]
            try:
                time.sleep(0.5)
                busy, avg = others_cpu(), os.getloadavg()[0]
                took, drawn = phases(path)
                path_s = first_drawn(path)
            finally:
                for p in hogs:
                    p.kill()
                    p.wait()
            cells = [f"{took[n][0]:.1f} ({took[n][1]:.2f})" for n in names]
            cells += [f"{drawn[k][0]:.2f} ({drawn[k][1]:.2f})" if k in drawn else "-"
                      for k in ("loaded", "run")]  # fmt: skip
            first = path_s.get("first_drawn_s", path_s["result_drawn_s"])
            cells += [f"{first:.1f}", f"{path_s['result_drawn_s']:.1f}"]
            load = "quiet" if not per_core else f"+{per_core} busy loops per CPU"
            lines.append(
                f"| {Path(path).parent.name}/{Path(path).name} | {load} | {busy:.2f} ({avg:.1f}) | "
                + " | ".join(cells)
                + " |"
            )
            print(lines[-1], flush=True)
    return lines


def side_by_side(models: list[str], before: str, loads: tuple[int, ...] = (0, 2)) -> list[str]:
    """The window's path (first_drawn) on each model with the code in the folder `before`
    (a checkout of an earlier commit) and this one's, one after the other in the same
    minute, quiet and beside busy loops per CPU: seconds to the first graph drawn."""
    import json
    import subprocess

    here = str(Path(__file__).resolve().parents[1])
    lines = [
        "| model | load | others' CPU (load average) | before: first graph drawn s | "
        "after: first graph drawn s | after: whole result drawn s | first, before / after |",
        "|---|---|---|---|---|---|---|",
    ]
    for path in models:
        for per_core in loads:
            hogs = [
                subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(per_core * (os.cpu_count() or 1))
            ]
            got: dict[str, dict[str, float]] = {}
            try:
                time.sleep(0.5)
                busy, avg = others_cpu(), os.getloadavg()[0]
                for label, tree in (("before", before), ("after", here)):
                    done = subprocess.run(
                        [sys.executable, "bench/graph_phases.py", "--first-json", path],
                        cwd=tree,
                        capture_output=True,
                        text=True,
                        timeout=2 * TIMEOUT_S,
                    )
                    got[label] = json.loads(done.stdout.strip().splitlines()[-1])
            finally:
                for p in hogs:
                    p.kill()
                    p.wait()
            old = got["before"].get("first_drawn_s", got["before"]["result_drawn_s"])
            new = got["after"].get("first_drawn_s", got["after"]["result_drawn_s"])
            load = "quiet" if not per_core else f"+{per_core} busy loops per CPU"
            lines.append(
                f"| {Path(path).parent.name}/{Path(path).name} | {load} | {busy:.2f} ({avg:.1f}) "
                f"| {old:.1f} | {new:.1f} | {got['after']['result_drawn_s']:.1f} | "
                f"{old / new:.1f} |"
            )
            print(lines[-1], flush=True)
    return lines


def _first_cpu_child(path: str, lean: bool) -> dict[str, float]:
    """In this fresh process: the graph job (low priority, as the window's) to its first
    GraphSoFar, its CPU-seconds in all and by phase; `lean`: the model's checker and file
    hash left out (a projection of the proposed change, patched in here only)."""
    import numpy  # noqa: F401  # the fork server's imports, done before the request
    import onnx
    import onnx.checker

    import engine.measure.liveness
    import engine.model.graph_blocks  # noqa: F401
    from engine import backends
    from engine.model import info as model_info
    from engine.model.workload import Workload
    from engine.run import graph_job as gj

    backends.shape_inference()
    backends.graph_as_run("ort")
    os.environ["OPSCOPE_CACHE_DIR"] = "/tmp/opscope-graph-first-cpu"  # no layout cached
    import shutil

    shutil.rmtree("/tmp/opscope-graph-first-cpu", ignore_errors=True)
    if lean:
        onnx.checker.check_model = lambda *a, **k: None
        model_info.files_sha256 = lambda files: ""
    spent: dict[str, float] = {"load": 0.0, "shapes": 0.0, "view": 0.0}

    def timed(name: str, fn: Any) -> Any:
        def call(*a: Any, **k: Any) -> Any:
            c0 = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                spent[name] += time.process_time() - c0

        return call

    gj.load_model = timed("load", gj.load_model)
    gj.inferred = timed("shapes", gj.inferred)
    gj._view = timed("view", gj._view)
    c0 = time.process_time()
    for ev in gj.graph_job(gj.GraphRequest(Workload(path), low_priority=True)):
        if isinstance(ev, gj.GraphSoFar):
            break
    return {"first": time.process_time() - c0, **spent}


def first_cpu_rows(models: list[str], repeats: int, other: str | None = None) -> list[str]:
    """The job's CPU to its first graph as it is and with the load's checker and hash left
    out (patched in; or as `other`, a folder holding a checkout, has it), one after the
    other, alternating, each in a fresh process; others' CPU and the load average over
    each pair."""
    import json
    import subprocess

    here = str(Path(__file__).resolve().parents[1])
    lean = "no check, no hash" if other is None else f"{other}'s code"
    lines = [
        "| model | pair | others' CPU (load average) | as is: first graph CPU-s (load, shapes, "
        f"view) | {lean}: first graph CPU-s (load, shapes, view) |",
        "|---|---|---|---|---|",
    ]
    for path in models:
        for i in range(repeats):
            got = {}
            busy_before = others_cpu()
            for side in (False, True) if i % 2 == 0 else (True, False):
                patch = ["--lean"] if side and other is None else []
                done = subprocess.run(
                    [sys.executable, "bench/graph_phases.py", "--first-cpu-child", *patch, path],
                    cwd=other if side and other is not None else here,
                    capture_output=True, text=True, timeout=TIMEOUT_S,
                )  # fmt: skip
                got[side] = json.loads(done.stdout.strip().splitlines()[-1])
            busy, avg = (busy_before + others_cpu()) / 2, os.getloadavg()[0]
            cells = [
                f"{g['first']:.2f} ({g['load']:.2f}, {g['shapes']:.2f}, {g['view']:.2f})"
                for g in (got[False], got[True])
            ]
            name = f"{Path(path).parent.name}/{Path(path).name}"
            head = f"| {name} | {i + 1} | {busy:.2f} ({avg:.1f}) | "
            lines.append(head + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--phases", action="store_true", help="each step, and the first graph")
    ap.add_argument("--before", metavar="DIR", help="the first graph, beside DIR's code")
    ap.add_argument("--first-json", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--first-cpu", action="store_true", help="CPU to the first graph")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--first-cpu-child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--lean", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.first_cpu_child:
        import json

        print(json.dumps(_first_cpu_child(args.models[0], args.lean)))
    elif args.first_cpu:
        print("\n".join(first_cpu_rows(args.models, args.repeats, args.before)))
    elif args.first_json:  # one measurement, for --before's side by side
        import json

        draw_once(synthetic_result(1, 1)[0])  # Qt started, as the window's is
        print(json.dumps(first_drawn(args.models[0])))
    elif args.before:
        print("\n".join(side_by_side(args.models, args.before)))
    else:
        print("\n".join(phase_rows(args.models)))


if __name__ == "__main__":
    main()
