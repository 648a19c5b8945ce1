"""The graph view's job (issue #26): the model's graph as loaded and as run, laid out,
with what fusion did between them; `opscope graph MODEL` runs it, and so does the window's
Graph dock, through the one job runner (a layout of thousands of nodes takes seconds).

As loaded: the model file, dtypes and shapes from ONNX shape inference at the run's input
shapes. As run: the optimized graph the runtime saves after its fusion at the config's
level, for the config's variant (INT8...), with the shapes and providers one profiled
inference saw. Each run node that is not a loaded node as it was lists the loaded nodes it
replaced (engine/model/graph_fusion.py). Repeated blocks (transformer layers) are found
in both and give a collapsed view; a graph of more than NODE_LIMIT nodes is laid out
collapsed only, and says so, until asked for in full (`expand`). Layouts are cached per
graph. The result is plain data: the window draws it, `--json` prints it."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, ClassVar

from engine import backends
from engine.cache import cache_root
from engine.errors import ModelError, OpScopeError, one_line
from engine.events import Event, Notice, Progress
from engine.model.graph_collapse import collapse
from engine.model.graph_fusion import by_name, fused_origins, removed
from engine.model.graph_io import graph_nodes
from engine.model.graph_layout import Box, lay_out
from engine.model.graph_precision import precisions
from engine.model.graph_view import INPUT, OUTPUT, ModelGraph, inferred, model_graph
from engine.model.info import load_model
from engine.model.inputs import generate_inputs, plan_inputs
from engine.model.workload import Workload
from engine.run.variant_for import variant_for

NODE_LIMIT = 2000  # beyond this many nodes a view opens collapsed (5,000 lay out in ~3 s)
STAGES = 4
# beyond this many nodes no view is made: one line says so before anything else is read
# (the runtime's session and shape inference on a 1,000,000-node chain take minutes in
# native calls that Ctrl-C cannot stop); a 100,000-node chain is drawn by layers
MAX_NODES = 100_000
# ... and beyond this many the graph as run is not made: the runtime's optimizer took over
# 6 minutes on a 100,000-node chain in one native call (20,000 fanned out: 13 s)
AS_RUN_MAX_NODES = 20_000
# Beside live timing the job runs one thread, at this niceness: none. Against busy
# processes at 0 a niced one gets a small share of a CPU each (CFS weights: nice 10 is 110
# against 1,024), and the window's MiniLM graph, 3-5 CPU-seconds, took 60 s to over 200 s
# on a busy machine at nice 10 (bench/graph_speed.py). One thread for a few seconds is
# what it takes from live timing, whose samples say how busy the machine was meanwhile.
LOW_PRIORITY_NICE = 0
# the graph as run's one profiled inference is stopped past this (issue 53: a Loop of 10^12
# iterations ran with no end); the graph is still shown, optimized, and says what is missing.
# On MiniLM and the detector the whole step (ONNX Runtime imported, the session made, the
# one profiled run) took 1.4-27 s on a busy machine, with 2 busy loops per CPU besides
# (bench/results/graph_speed.md): the run alone, a part of that, stays far below a minute,
# which is short enough to wait for with progress.
AS_RUN_LIMIT_S = 60.0
WAIT_PROGRESS_S = 1.0  # while the graph as run is made: "... 12 s so far" at most this often


@dataclass(frozen=True)
class GraphRequest:
    # the workload's data files are the window's Inputs panel's (or --inputs/--calibration/
    # --labels): an INT8 variant is built, or taken from the cache, from the run's samples
    workload: Workload
    seed: int = 0
    expand: bool = False  # lay out every node even beyond NODE_LIMIT
    as_run: bool = True  # False: the model as loaded only (no session is made)
    low_priority: bool = False  # beside live timing: one thread, below the host's priority
    run_limit_s: float = AS_RUN_LIMIT_S  # the profiled inference's time limit
    job_name: ClassVar[str] = "graph"


@dataclass(frozen=True)
class GraphSoFar:
    """The graph as far as the job has made it, sent as soon as it can be drawn (issue 53:
    the window drew nothing for a minute on a busy machine): `result` has the job's own
    form, the view as loaded first (with the shapes the file declares and ONNX's inference
    tells), then with the symbolic shapes; `pending` says in words what is still being
    worked on (the symbolic shapes, the graph as run). The job's result has it all."""

    result: dict[str, Any]
    pending: tuple[str, ...]
    send_now: ClassVar[bool] = True  # not held back to batch it (engine/run/child_job.py)


def graph_job(req: GraphRequest) -> Generator[Event | GraphSoFar, None, dict[str, Any]]:
    config = req.workload.config.resolved()
    if req.low_priority:  # the window's live timing goes on meanwhile: take little of it
        import contextlib
        import os

        if LOW_PRIORITY_NICE:
            with contextlib.suppress(OSError, AttributeError):
                os.nice(LOW_PRIORITY_NICE)
        config = dataclasses.replace(config, threads=1)  # fusion does not depend on it
    yield Progress("graph", 0, STAGES, "reading the model")
    # neither the checker's warning nor the files' hash is shown here: each would read the
    # whole file again before the first graph (0.2 CPU-s of MiniLM's 0.5)
    model, info = load_model(req.workload.model, check=False, digest=False)
    total = info.nodes + info.subgraph_nodes
    if total > MAX_NODES:
        raise ModelError(
            f"{total:,} nodes: more than the graph view lays out ({MAX_NODES:,}); "
            "`opscope info` and `opscope profile` summarize it by op type, or cut out "
            "a part of it (onnx.utils.extract_model) to see that part's graph",
            info.path,
        )
    plan = plan_inputs(info, config.batch, req.workload.inputs.shapes, req.workload.inputs.dims)
    try:  # ONNX's own shape inference first (milliseconds): the symbolic one comes after
        loaded = model_graph(model, inferred(model, plan.shapes))
    except ModelError as exc:  # an invalid graph: the line names the file too
        raise ModelError(exc.message, info.path) from exc
    loaded_io = graph_nodes(model.graph)
    inputs = [v.name for v in info.inputs]
    weights = frozenset(t.name for t in model.graph.initializer)
    result: dict[str, Any] = {
        "model": info.path,
        "name": info.name,
        "config": config.to_json(),
        "inputs": {k: list(v) for k, v in plan.shapes.items()},
        "node_limit": NODE_LIMIT,
        "views": {},
        "fused": {},
        "removed": [],
        "as_run_error": None,
    }
    cache = cache_root() / "layouts"
    yield Progress("graph", 1, STAGES, _laying_out(loaded, "as loaded", req.expand))
    loaded_view = result["views"]["loaded"] = _view(loaded, {}, req.expand, cache)
    _fill(loaded_view, loaded)

    refine = backends.shape_inference()
    unsized = _unsized(loaded) if refine is not None else 0
    lend = backends.graph_as_run(config.engine) if req.as_run else None
    if req.as_run and total > AS_RUN_MAX_NODES:
        lend = None
        result["as_run_error"] = (
            f"{total:,} nodes, more than {AS_RUN_MAX_NODES:,}: the runtime's optimized "
            "graph of a model this large takes minutes to make (the graph as loaded is shown)"
        )
    elif req.as_run and lend is None:
        result["as_run_error"] = f"the {config.engine} engine does not show its graph as run"
    symbolic = f"the shapes of {unsized:,} tensors (symbolic inference)"
    as_run = "the graph as run"
    pending = [w for w, due in ((symbolic, unsized), (as_run, lend is not None)) if due]
    if pending:
        yield _so_far(result, pending)
    if unsized and refine is not None:
        yield Progress("graph", 1, STAGES, f"the symbolic shape inference of {unsized:,} "
                       "tensors ONNX's inference left unknown")  # fmt: skip
        loaded = model_graph(model, inferred(model, plan.shapes, refine))
        _fill(loaded_view, loaded)
        pending.remove(symbolic)
        if pending:
            yield _so_far(result, pending)
    feeds = generate_inputs(model, info, plan, req.seed) if lend is not None else {}
    del model

    run_graph: ModelGraph | None = None
    kept: list[str] = []
    if lend is not None:
        yield Progress("graph", 2, STAGES, f"the {config.precision} variant, as run")
        variant = None  # FP32 of an ONNX file runs the file itself: nothing to build
        if config.precision != "fp32" or backends.exporter_for(req.workload.model) is not None:
            variant = yield from variant_for(
                req.workload.with_config(config), plan.shapes, req.seed
            )
        if variant is not None:
            int8 = variant.details.get("int8") or {}
            kept = [str(x) for x in int8.get("excluded_nodes") or []]
        try:  # the runtime refusing the model (duplicate node names...): as loaded only
            path = variant.path if variant else req.workload.model
            ran = yield from _waited(lend, path, config, feeds, req.run_limit_s)
        except OpScopeError as exc:
            ran = None
            result["as_run_error"] = f"the runtime cannot run it: {one_line(exc)}"
        if ran is not None:
            result["provider_used"] = ran.provider_used
            result["as_run_error"] = ran.error
        if ran is not None and ran.model is not None:
            try:
                known = {**inferred(ran.model, {}), **_inputs_of(loaded), **ran.tensors}
                run_graph = model_graph(ran.model, known)
            except OpScopeError as exc:
                result["as_run_error"] = f"the optimized graph: {exc}"
        if run_graph is not None and ran is not None and ran.model is not None:
            run_io = graph_nodes(ran.model.graph)
            origins = by_name(fused_origins(run_io, loaded_io, inputs, weights), run_io, loaded_io)
            result["fused"] = origins
            result["removed"] = removed(run_io, loaded_io, origins)
            yield Progress("graph", 3, STAGES, _laying_out(run_graph, "as run", req.expand))
            run_view = result["views"]["run"] = _view(
                run_graph,
                ran.providers,
                req.expand,
                cache,
                precisions(run_graph.nodes, run_graph.tensors, kept, origins),
            )
            run_view["memory"] = _memory(run_graph, ran.order)
    result["kept_fp32"] = kept
    if result["as_run_error"]:
        yield Notice("info", f"graph: as run: {result['as_run_error']}")
    yield Progress("graph", STAGES, STAGES, "done")
    return result


def _waited(
    lend: Any, path: str, config: Any, feeds: dict[str, Any], limit_s: float
) -> Generator[Progress, None, Any]:
    """`lend(...)`, the graph as run, on a thread of its own while this generator says how
    long it has taken (the session, then its one profiled inference, stopped past
    `limit_s`); an interruption here stops that inference too."""
    import threading

    box: dict[str, Any] = {}
    stop, started = threading.Event(), []  # when the profiled run started

    def work() -> None:
        try:
            box["value"] = lend(
                path, config, feeds, limit_s, stop, lambda: started.append(time.monotonic())
            )
        except BaseException as exc:  # handed to the job's thread
            box["error"] = exc

    worker = threading.Thread(target=work, name="opscope-graph-as-run", daemon=True)
    t0 = time.monotonic()
    worker.start()
    try:
        while True:
            worker.join(WAIT_PROGRESS_S)
            if not worker.is_alive():
                break
            yield Progress("graph", 2, STAGES, _waiting(time.monotonic(), t0, started, limit_s))
    except BaseException:  # cancelled (Ctrl+C, SIGTERM) or closed: the run stops too
        stop.set()
        worker.join(WAIT_PROGRESS_S)  # a run stops between nodes; a session's make does not
        raise
    if "error" in box:
        raise box["error"]
    return box["value"]


def _waiting(now: float, t0: float, started: list[float], limit_s: float) -> str:
    """What the graph as run is waiting on, and for how long."""
    if not started:
        return f"the runtime's session and its optimized graph: {now - t0:.0f} s so far"
    took = now - started[0]
    if took < limit_s:
        return f"profiled run: {took:.0f} s so far (stopped at {limit_s:.0f} s)"
    return f"profiled run stopped at {limit_s:.0f} s; its session closing: {took:.0f} s"


def _so_far(result: dict[str, Any], pending: list[str]) -> GraphSoFar:
    """The result so far, its views copied (the job goes on filling them in)."""
    views = {k: dict(v) for k, v in result["views"].items()}
    return GraphSoFar({**result, "views": views, "pending": list(pending)}, tuple(pending))


def _fill(view: dict[str, Any], graph: ModelGraph) -> None:
    """The view as loaded given `graph`'s shapes (the same nodes and edges, so the same
    layout): its tensors, its memory over one inference and its nodes' precisions."""
    view["tensors"] = _tensors(graph)
    view["memory"] = _memory(graph)
    view["precision"] = precisions(graph.nodes, graph.tensors)


def _unsized(graph: ModelGraph) -> int:
    """How many tensors the graph's nodes make whose size is not known."""
    made = {t for n in graph.nodes if n.op_type not in (INPUT, OUTPUT) for t in n.outputs}
    return sum(1 for t in made if graph.tensors.get(t) is None or graph.tensors[t].nbytes is None)


def _tensors(graph: ModelGraph) -> dict[str, Any]:
    return {
        k: [t.dtype, None if t.shape is None else list(t.shape)] for k, t in graph.tensors.items()
    }


def _view(
    graph: ModelGraph,
    providers: dict[str, str],
    expand: bool,
    cache: Any,
    precision: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One view's nodes, tensors and edges, its repeated blocks, and its layouts: in full
    (when small enough or asked for) and collapsed (when it has repeated blocks)."""
    boxes = [Box(n.name, _label(n.name, n.op_type), n.parent) for n in graph.nodes]
    pairs = list(dict.fromkeys((s, d) for s, d, _ in graph.edges))
    blocks = _blocks(graph)
    view: dict[str, Any] = {
        "nodes": [
            {
                "name": n.name,
                "op": n.op_type,
                "domain": n.domain,
                "inputs": list(n.inputs),
                "outputs": list(n.outputs),
                "weights": list(n.weights),
                "attrs": [list(a) for a in n.attrs],
                "parent": n.parent,
            }
            for n in graph.nodes
        ],
        "tensors": _tensors(graph),
        "edges": [list(e) for e in graph.edges],
        "providers": providers,
        "blocks": [{"label": label, "nodes": list(members)} for label, members in blocks],
        "layout": None,
        "collapsed": None,
        "note": "",
    }
    if precision is not None:
        view["precision"] = precision
    t0 = time.perf_counter()
    if graph.op_count <= NODE_LIMIT or expand:
        view["layout"] = lay_out(boxes, pairs, cache).to_json()
        view["note"] = _layers_note(view["layout"], len(boxes))
    else:
        view["note"] = (
            f"{graph.op_count:,} nodes, more than {NODE_LIMIT:,}: opened with "
            "repeated blocks collapsed (Expand lays out every node)"
        )
    if blocks:
        c_boxes, c_edges, made = collapse(boxes, pairs, blocks)
        view["collapsed"] = {
            "layout": lay_out(c_boxes, c_edges, cache).to_json(),
            "blocks": {b.name: {"label": b.label, "members": list(b.members)} for b in made},
        }
    elif view["layout"] is None:  # nothing repeats: all of it (by layers when too large)
        full = view["layout"] = lay_out(boxes, pairs, cache).to_json()
        view["note"] = " ".join(
            w
            for w in (
                f"{graph.op_count:,} nodes and no repeated block: laid out in full.",
                _layers_note(full, len(boxes)),
            )
            if w
        )
    view["layout_s"] = time.perf_counter() - t0
    return view


def _laying_out(graph: ModelGraph, title: str, expand: bool) -> str:
    """The progress line before a view's layout, with what it will take when that is long
    (graph_layout.estimate_s; beyond its budget, the linear layout's own few seconds)."""
    from engine.model.graph_layout import GRAPHLAY_BUDGET_S, estimate_s, layers_of

    text = f"laying out {graph.op_count:,} nodes {title}"
    if graph.op_count > NODE_LIMIT and not expand:
        return text + " (repeated blocks collapsed first)"
    boxes = [Box(n.name, n.op_type) for n in graph.nodes]
    guess = estimate_s(len(boxes), layers_of(boxes, [(s, d) for s, d, _ in graph.edges]))
    if guess > GRAPHLAY_BUDGET_S:
        return text + f" by layers (the layered layout would take about {guess:,.0f} s)"
    return text + (f" (about {guess:.0f} s)" if guess >= 1 else "")


def _layers_note(layout: dict[str, Any], n: int) -> str:
    """What a layout too large for graphlay was drawn as, and why (graph_layout.py)."""
    if layout.get("method") != "layers":
        return ""
    return (
        f"{n:,} boxes: the layered layout would take about {layout['estimate_s']:,.0f} s, "
        "so they are drawn by layers (wide layers wrapped, straight edges)"
    )


def _inputs_of(graph: ModelGraph) -> dict[str, Any]:
    """The graph inputs' dtypes and shapes, at the run's shapes."""
    return {n.name: graph.tensors[n.name] for n in graph.nodes
            if n.op_type == INPUT and n.name in graph.tensors}  # fmt: skip


def _memory(graph: ModelGraph, order: list[str] | None = None) -> dict[str, Any]:
    """Activation memory alive while each node runs, over one inference (the order it
    ran in, as run; file order as loaded): its timeline, peak and the tensors alive there
    (engine/measure/liveness.py). Unknown sizes are left out and counted."""
    from engine.measure.liveness import liveness
    from engine.model.graph_io import NodeIO

    nodes = [n for n in graph.nodes if n.op_type not in (INPUT, OUTPUT) and n.parent is None]
    if order:
        at = {name: i for i, name in enumerate(order)}
        nodes.sort(key=lambda n: at.get(n.name, len(at)))
    io = [NodeIO(n.name, n.op_type, n.inputs, n.outputs) for n in nodes]
    sizes = {k: t.nbytes for k, t in graph.tensors.items()}
    inputs = [n.name for n in graph.nodes if n.op_type == INPUT]
    ends = [t for n in graph.nodes if n.op_type == OUTPUT for t in n.inputs]
    return liveness(io, sizes, inputs, ends).to_json()


def _label(name: str, op_type: str) -> str:
    return name if op_type in (INPUT, OUTPUT) else op_type


def _blocks(graph: ModelGraph) -> list[tuple[str, list[str]]]:
    """(label, member names) of every repetition of a repeated block, top level only."""
    from engine.model.graph_blocks import repeated_blocks
    from engine.model.graph_io import NodeIO

    top = [
        NodeIO(n.name, n.op_type, n.inputs, n.outputs)
        for n in graph.nodes
        if n.parent is None and n.op_type not in (INPUT, OUTPUT)
    ]
    inputs = [n.name for n in graph.nodes if n.op_type == INPUT]
    found = repeated_blocks(top, inputs, frozenset())
    children: dict[str, list[str]] = {}
    for n in graph.nodes:
        if n.parent is not None:
            children.setdefault(n.parent, []).append(n.name)
    out = []
    for rep in found:
        for b in rep.blocks:
            members, todo = list(b.nodes), list(b.nodes)
            while todo:  # a member's If/Loop bodies go with it
                kids = children.get(todo.pop(), [])
                members += kids
                todo += kids
            out.append((b.label, members))
    return out
