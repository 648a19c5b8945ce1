"""How fast the graph view lays out and draws (issue #26's goals: a 300-node model laid out
and drawn in 1 s or less, a 5,000-node one in 5 s or less, pan and zoom smooth with the
heat overlay on). Synthetic ONNX-shaped transformer graphs (the generator of
bench/results/graph_layout_candidates.md: 2 layers, 289 nodes; 24 layers, 4,849 nodes), and
a real model through the whole job when one is at hand. Layout without the cache; then the
window's GraphView draws the result offscreen with the time-share overlay, and each frame
of 40 pans and zooms is timed.

The window's real path (issue 53: a 206-node model took about 60 s on a busy machine while
the layout alone takes 0.06 s): for each real model, the graph job as the window's Graph
dock asks for it (low priority, in a spawned child process of the host's job runner) from
the click to its result, without the layout cache, quiet and beside 2 busy processes per
CPU; and side by side, the same job at the niceness it had before (10), to give the ratio.

Where the time goes, step by step, and when the window first draws a graph:
bench/graph_phases.py.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/graph_speed.py [--out FILE] [MODEL...]

`--stopped-exit DIR`: `opscope graph`'s path (the graph job, the command's printer and its
exit, tests/test_graph_exit.py's script) on a Loop of 10^12 iterations whose profiled run is
stopped at each `--limits` (seconds): from the stop to the process's end, with the code in
DIR (a checkout from before) and this checkout's, one after the other, alternating, with
others' CPU and the load average:

    .venv/bin/python bench/graph_speed.py --stopped-exit DIR [--limits 4,20] [--repeats 2]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def onnx_like_dag(n_layers: int, dims: int = 2) -> list[tuple[str, str]]:
    edges: list[tuple[str, str]] = []
    cnt = [0]

    def op(kind: str, *ins: str) -> str:
        cnt[0] += 1
        n = f"{kind}_{cnt[0]}"
        edges.extend((i, n) for i in ins)
        return n

    def c() -> str:
        return op("Constant")

    def shape_of(x: str) -> str:
        s = op("Shape", x)
        parts = [op("Unsqueeze", op("Gather", s, c()), c()) for _ in range(dims)]
        return op("Concat", *parts, c(), c())

    def reshape(x: str, src: str) -> str:
        return op("Reshape", x, shape_of(src))

    def layernorm(x: str) -> str:
        m = op("ReduceMean", x)
        d = op("Sub", x, m)
        v = op("ReduceMean", op("Pow", d, c()))
        return op("Add", op("Mul", op("Div", d, op("Sqrt", op("Add", v, c()))), c()), c())

    def linear(x: str) -> str:
        return op("Add", op("MatMul", x), c())

    ids, mask = op("input_ids"), op("attention_mask")
    pos = op("Unsqueeze", op("Range", c(), op("Gather", op("Shape", ids), c()), c()), c())
    x = layernorm(op("Add", op("Gather", ids), op("Gather", pos)))
    m = op("Mul", op("Sub", c(), op("Cast", op("Unsqueeze", op("Unsqueeze", mask, c()), c()))), c())
    for _ in range(n_layers):
        h = layernorm(x)
        q, k, v = (op("Transpose", reshape(linear(h), h)) for _ in range(3))
        a = op("Softmax", op("Add", op("Div", op("MatMul", q, op("Transpose", k)), c()), m))
        o = op("Add", linear(reshape(op("Transpose", op("MatMul", a, v)), h)), x)
        f = linear(o)
        g = op("Mul", op("Mul", f, op("Add", op("Erf", op("Div", f, c())), c())), c())
        x = op("Add", linear(g), o)
    op("output", layernorm(x))
    return edges


def synthetic_result(n_layers: int, dims: int) -> tuple[dict[str, Any], float, int]:
    """A graph job's result for the synthetic graph, laid out without the cache."""
    from engine.model.graph_collapse import collapse
    from engine.model.graph_layout import Box, lay_out

    edges = onnx_like_dag(n_layers, dims)
    names = list(dict.fromkeys([n for e in edges for n in e]))
    ins = {n: [s for s, d in edges if d == n] for n in names}
    nodes: list[dict[str, Any]] = [
        {
            "name": n,
            "op": n.rsplit("_", 1)[0],
            "inputs": [f"t_{s}" for s in ins[n]],
            "outputs": [f"t_{n}"],
            "weights": [],
            "attrs": [],
            "parent": None,
            "domain": "",
        }
        for n in names
    ]
    boxes = [Box(n["name"], n["op"]) for n in nodes]
    t0 = time.perf_counter()
    placed = lay_out(boxes, edges, None)
    layout_s = time.perf_counter() - t0
    view: dict[str, Any] = {
        "nodes": nodes,
        "tensors": {},
        "edges": [[s, d, f"t_{s}"] for s, d in edges],
        "providers": {},
        "blocks": [],
        "layout": placed.to_json(),
        "collapsed": None,
        "note": "",
        "layout_s": layout_s,
    }
    from engine.model.graph_blocks import repeated_blocks
    from engine.model.graph_io import NodeIO

    io = [NodeIO(n["name"], n["op"], tuple(n["inputs"]), tuple(n["outputs"])) for n in nodes]
    reps = repeated_blocks(io, [], frozenset())
    blocks = [(b.label, list(b.nodes)) for r in reps for b in r.blocks]
    if blocks:
        t1 = time.perf_counter()
        cb, ce, made = collapse(boxes, edges, blocks)
        view["collapsed"] = {
            "layout": lay_out(cb, ce, None).to_json(),
            "blocks": {b.name: {"label": b.label, "members": list(b.members)} for b in made},
        }
        view["collapse_s"] = time.perf_counter() - t1  # collapse and its layout
    return {"views": {"run": view}, "fused": {}, "model": "synthetic"}, layout_s, len(blocks)


def stats_for(names: list[str]) -> list[Any]:
    from engine.measure.op_stats import OpStat

    total = len(names)
    return [
        OpStat(
            n,
            n.rsplit("_", 1)[0],
            "CPUExecutionProvider",
            1,
            (i % 17 + 1) * 0.01,
            0.01,
            0.02,
            (i % 17 + 1) / (9 * total),
            1000,
            1.0,
            None,
            None,
            None,
        )
        for i, n in enumerate(names)
    ]


def draw(result: dict[str, Any]) -> dict[str, float]:
    """Set the result on a GraphView with the heat overlay on, paint it, then pan and zoom."""
    from PySide6.QtWidgets import QApplication

    from widgets.graph_view import GraphView

    app = QApplication.instance() or QApplication([])
    view = GraphView()
    view.resize(1400, 900)
    view.show()
    app.processEvents()
    names = [n["name"] for n in result["views"]["run"]["nodes"]]
    view.set_figures(stats_for(names), None)  # the overlay's figures before the graph
    t0 = time.perf_counter()
    view.set_result(result)
    view.canvas.viewport().repaint()
    app.processEvents()
    draw_s = time.perf_counter() - t0
    view.canvas.frame_ms.clear()
    canvas = view.canvas
    for i in range(40):  # pans at the reading zoom, then zooms out and in
        if i < 20:
            canvas.verticalScrollBar().setValue(canvas.verticalScrollBar().value() + 120)
        else:
            canvas.zoom(0.8 if i < 30 else 1.25)
        canvas.viewport().repaint()
    frames = canvas.frame_ms
    canvas.fit(readable=False)  # the whole graph, however small
    canvas.viewport().repaint()
    whole = canvas.frame_ms[-1]
    view.close()
    return {
        "draw_s": draw_s,
        "frame_median_ms": statistics.median(frames),
        "frame_max_ms": max(frames),
        "whole_ms": whole,
        "boxes": len(canvas.items_by_name),
    }


def real(path: str) -> tuple[dict[str, Any], float]:
    from engine.events import drive
    from engine.model.workload import Workload
    from engine.run.graph_job import GraphRequest, graph_job

    os.environ["OPSCOPE_CACHE_DIR"] = "/tmp/opscope-graph-bench-cache"  # no cached layout
    import shutil

    shutil.rmtree("/tmp/opscope-graph-bench-cache/layouts", ignore_errors=True)
    t0 = time.perf_counter()
    r = drive(graph_job(GraphRequest(Workload(path))), lambda _: None)
    return r, time.perf_counter() - t0


def _job_at_nice(nice: int, path: str, conn: Any) -> None:
    """A spawned child: the window's graph job with its low priority at `nice`."""
    from engine.events import drive
    from engine.model.workload import Workload
    from engine.run import graph_job

    graph_job.LOW_PRIORITY_NICE = nice
    req = graph_job.GraphRequest(Workload(path), low_priority=True)
    drive(graph_job.graph_job(req), lambda _: None)
    conn.send("done")


def window_path(path: str, nice: int | None) -> float:
    """Seconds from asking to the result, for the window's graph job on `path` (no layout
    cache): through the engine host's job runner (nice None: the job's own priority), or a
    spawned child at `nice`."""
    import multiprocessing as mp
    import shutil
    import threading

    os.environ["OPSCOPE_CACHE_DIR"] = "/tmp/opscope-graph-bench-cache"
    shutil.rmtree("/tmp/opscope-graph-bench-cache/layouts", ignore_errors=True)
    t0 = time.perf_counter()
    if nice is None:
        from engine.events import JobUpdate
        from engine.model.workload import Workload
        from engine.run.graph_job import GraphRequest
        from engine.run.host_jobs import HostJob

        ended: list[JobUpdate] = []
        done = threading.Event()

        def put(ev: Any) -> None:
            if isinstance(ev, JobUpdate) and ev.kind != "events":
                ended.append(ev)
                done.set()

        HostJob(1, GraphRequest(Workload(path), low_priority=True), put)
        done.wait(TIMEOUT_S)
        if not ended or ended[0].kind != "done":
            raise SystemExit(f"{path}: the graph job did not end well: {ended}")
        return time.perf_counter() - t0
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_job_at_nice, args=(nice, path, child))
    proc.start()
    got = parent.poll(TIMEOUT_S)
    took = time.perf_counter() - t0
    proc.kill()
    proc.join()
    return took if got else float("inf")


TIMEOUT_S = 150.0


def others_cpu(seconds: float = 1.0) -> float:
    """CPUs' worth of time other processes took over the next `seconds`."""
    from engine.measure.contention import ContentionProbe

    probe = ContentionProbe()
    start = probe.read()
    time.sleep(seconds)
    return probe.since(start).others_cpu


def window_rows(models: list[str]) -> list[str]:
    """The window's path on each model, quiet and beside 2 busy processes per CPU."""
    import subprocess

    lines = [
        "| model | load | others' CPU before | window's job s (as now) | "
        "same job at nice 10 s | ratio |",
        "|---|---|---|---|---|---|",
    ]
    for path in models:
        for per_core in (0, 2):
            hogs = [
                subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(per_core * (os.cpu_count() or 1))
            ]
            try:
                time.sleep(0.5)
                busy = others_cpu()
                now = window_path(path, None)
                old = window_path(path, 10)
            finally:
                for p in hogs:
                    p.kill()
                    p.wait()
            load = "quiet" if not per_core else f"{per_core} busy loops per CPU"
            old_s = f"{old:.1f}" if old != float("inf") else f"> {TIMEOUT_S:.0f}"
            lines.append(
                f"| {Path(path).parent.name}/{Path(path).name} | {load} | {busy:.2f} | "
                f"{now:.1f} | {old_s} | {old / now:.1f} |"
            )
            print(lines[-1], flush=True)
    return lines


def stopped_exit_rows(before: str, limits: list[float], repeats: int) -> list[str]:
    """Seconds from the profiled run's stop to the process's end, DIR's code and this
    checkout's alternating, each in a fresh process."""
    import subprocess
    import tempfile

    from tests.test_graph_exit import COMMAND
    from tests.test_signals_native import endless_loop_model

    here = str(Path(__file__).resolve().parents[1])
    model = str(endless_loop_model(Path(tempfile.mkdtemp(prefix="opscope-exit-")) / "loop.onnx"))
    lines = [
        "| limit s | pair | others' CPU (load average) | before: start to run s | before: "
        "stop to exit s | after: start to run s | after: stop to exit s |",
        "|---|---|---|---|---|---|---|",
    ]
    for limit in limits:
        for i in range(repeats):
            got: dict[str, tuple[float, float]] = {}
            busy = others_cpu()
            for side in ("before", "after") if i % 2 == 0 else ("after", "before"):
                t0 = time.monotonic()
                done = subprocess.run(
                    [sys.executable, "-c", COMMAND, model, str(limit)],
                    cwd=before if side == "before" else here,
                    capture_output=True, text=True, timeout=600,
                )  # fmt: skip
                end = time.monotonic()
                (line,) = [x for x in done.stderr.splitlines() if x.startswith("@")
                           and ", as run" in x]  # fmt: skip
                run = float(line[1:].split()[0])
                got[side] = (run - t0, end - run - limit)
            avg = os.getloadavg()[0]
            b, a = got["before"], got["after"]
            lines.append(
                f"| {limit:.0f} | {i + 1} | {busy:.2f} ({avg:.1f}) | {b[0]:.1f} | {b[1]:.1f} "
                f"| {a[0]:.1f} | {a[1]:.1f} |"
            )
            print(lines[-1], flush=True)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*")
    ap.add_argument("--stopped-exit", metavar="DIR", help="the exit after a stopped run")
    ap.add_argument("--limits", default="4,20")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default="bench/results/graph_speed.md")
    ap.add_argument("--window-only", action="store_true", help="only the window's real path")
    args = ap.parse_args()
    if args.stopped_exit:
        limits = [float(x) for x in args.limits.split(",")]
        print("\n".join(stopped_exit_rows(args.stopped_exit, limits, args.repeats)))
        return
    window = window_rows(args.models) if args.models else []
    if args.window_only:
        print("\n".join(window))
        return
    rows: list[tuple[str, int, float, int, dict[str, float]]] = []
    for layers, dims in ((2, 3), (24, 8)):
        result, layout_s, nblocks = synthetic_result(layers, dims)
        d = draw(result)
        n = len(result["views"]["run"]["nodes"])
        rows.append((f"synthetic, {layers} layers", n, layout_s, nblocks, d))
        print(rows[-1], flush=True)
        view = result["views"]["run"]
        if view.get("collapsed"):  # as a graph over the node limit opens: collapsed first
            view["layout"] = None
            d = draw(result)
            rows.append(
                (
                    f"synthetic, {layers} layers, collapsed",
                    int(d["boxes"]),
                    view["collapse_s"],
                    nblocks,
                    d,
                )
            )
            print(rows[-1], flush=True)
    for path in args.models:
        r, job_s = real(path)
        d = draw(r)
        n = len(r["views"]["run"]["nodes"])
        rows.append(
            (
                f"{Path(path).parent.name}/{Path(path).name} (whole job, as run)",
                n,
                r["views"]["run"]["layout_s"],
                len(r["views"]["run"]["blocks"]),
                d,
            )
        )
        print(rows[-1], f"job {job_s:.2f} s", flush=True)
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError, StopIteration), open("/proc/cpuinfo") as fh:
        cpu = next(ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name"))
    lines = [
        "# Graph view speed (issue #26)",
        "",
        f"{time.strftime('%Y-%m-%d')}, {cpu}, {os.cpu_count()} CPUs, offscreen Qt "
        "(`QT_QPA_PLATFORM=offscreen .venv/bin/python bench/graph_speed.py MODEL`). Layout: "
        "graphlay without the cache (a model opened again reads its cached layout). Draw: "
        "GraphView.set_result with the time-share overlay on, to the first painted frame. "
        "Frames: 20 pans then 20 zoom steps at the view's opening zoom, each painted and timed.",
        "",
        "| graph | nodes | layout s | repeated blocks | draw s | layout + draw s | "
        "frame median ms | frame max ms | whole graph frame ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, n, lay, nb, d in rows:
        lines.append(
            f"| {name} | {n:,} | {lay:.2f} | {nb} | {d['draw_s']:.2f} | "
            f"{lay + d['draw_s']:.2f} | {d['frame_median_ms']:.1f} | "
            f"{d['frame_max_ms']:.1f} | {d['whole_ms']:.1f} |"
        )
    lines += ["", "Goals: 300 nodes in 1 s or less, 5,000 in 5 s or less (layout + draw)."]
    if window:
        lines += [
            "",
            "## The window's real path (issue 53)",
            "",
            "The graph job as the Graph dock runs it (one thread, low priority, a spawned "
            "child of the host's job runner, no layout cache), from the request to its "
            "result; beside it, the same job at the niceness it used to take (10). "
            "'Others' CPU before': CPUs' worth other processes took in the second before.",
            "",
            *window,
        ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
