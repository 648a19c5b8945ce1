"""`opscope graph MODEL`: the model's graph as loaded and as run (after the runtime's
fusion, for the config's variant), what each fused node replaced, what the optimizer
folded away, the repeated blocks, and the layout the window draws (cached per graph).

Each part is printed as it comes, as the window draws it (issue 53): the graph as loaded as
soon as it is laid out, then its shapes once the symbolic inference has sized what ONNX's
could not, then the graph as run and what fusion did. Progress goes to stderr; `--json`
stays one document, written at the end."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any, TextIO

from engine.cli.common import EXIT_OK, add_json_flag, add_seed_flag, workload_of, write_json
from engine.cli.remote_cmd import add_host_flag
from engine.errors import escape_controls as safe

SHOWN_FUSIONS = 8


def add_graph_parser(sub: Any, add_knobs: Any) -> None:
    p = sub.add_parser(
        "graph",
        help="the model's graph as loaded and as run: what fusion replaced, repeated blocks, "
        "the layout the window draws",
    )
    p.add_argument("model", help="an .onnx file")
    add_knobs(p)
    p.add_argument(
        "--expand",
        action="store_true",
        help="lay out every node even beyond the node limit (collapsed otherwise)",
    )
    p.add_argument(
        "--explorer",
        metavar="FILE",
        help="write each node's precision as run as Model Explorer node data for "
        "the model file (the window also exports its time and bandwidth overlays)",
    )
    add_seed_flag(p, "seed for generated inputs")
    add_host_flag(p)
    add_json_flag(p, "the graph: nodes, tensors, edges, fusion, blocks and layouts")
    p.set_defaults(handler=_cmd_graph)


def _cmd_graph(args: argparse.Namespace) -> int:
    if args.host:
        from engine.cli.remote_cmd import cmd_remote

        return cmd_remote(args)
    from engine.run.graph_job import GraphRequest

    req = GraphRequest(workload_of(args), seed=args.seed, expand=args.expand)
    out = sys.stdout if args.json != "-" else sys.stderr
    result = run_shown(req, out)
    if args.explorer:
        from engine.model.model_explorer import export_overlay

        precision = _loaded_precision(result)
        n = export_overlay(result["model"], precision, "OpScope precision as run", args.explorer)
        print(
            f"explorer   {safe(args.explorer)}: precision of {n} nodes (Model Explorer node data)",
            file=out,
        )
    if args.json:
        write_json(args.json, {"graph": result})
    return EXIT_OK


def _loaded_precision(result: dict[str, Any]) -> dict[str, float | str | None]:
    """Each node of the model file: its own precision as run, or that of the node that
    replaced it (folded-away nodes have none)."""
    run = (result["views"].get("run") or {}).get("precision") or {}
    stand_in = {o: r for r, origins in result.get("fused", {}).items() for o in origins}
    out: dict[str, float | str | None] = {}
    for n in result["views"]["loaded"]["nodes"]:
        name = n["name"]
        label = run.get(name) or run.get(stand_in.get(name, ""))
        if label:
            out[name] = label
    return out


def run_shown(req: Any, out: TextIO) -> dict[str, Any]:
    """Run the graph job `req`, its progress on stderr's live line, each part of its
    summary printed to `out` as soon as the job has it (GraphSoFar); its result."""
    from engine.cli.printer import LivePrinter
    from engine.events import Notice, Progress, drive
    from engine.run.graph_job import GraphSoFar
    from engine.run.jobs import run_job

    printer = LivePrinter()
    parts = Parts(out, printer.close)

    def feed(ev: Any) -> None:
        if isinstance(ev, GraphSoFar):
            parts.so_far(ev.result, ev.pending)
        elif isinstance(ev, Progress | Notice):
            printer.feed(ev)

    try:
        result: dict[str, Any] = drive(run_job(req), feed)
    finally:
        printer.close()
    parts.so_far(result, ())
    return result


class Parts:
    """The summary's parts printed once each, in order, as the job's result fills in:
    the graph as loaded, its shapes (final once no symbolic inference is pending), the
    graph as run with what fusion did (at the end)."""

    def __init__(self, out: TextIO, clear: Callable[[], None]) -> None:
        self.out, self.clear, self.done = out, clear, 0

    def so_far(self, r: dict[str, Any], pending: Any) -> None:
        steps: list[Callable[[dict[str, Any], TextIO], None]] = [
            print_loaded,
            print_shapes,
            print_run,
        ]
        ready = 1 if any("symbolic" in str(p) for p in pending) else 2 if pending else 3
        if self.done >= ready:
            return
        self.clear()  # stderr's live line, before stdout's lines (one terminal)
        for step in steps[self.done : ready]:
            step(r, self.out)
        self.done = ready
        self.out.flush()


def print_graph(r: dict[str, Any], out: TextIO) -> None:
    """The whole summary at once."""
    print_loaded(r, out)
    print_shapes(r, out)
    print_run(r, out)


def print_loaded(r: dict[str, Any], out: TextIO) -> None:
    print_view(r, "loaded", out)


def print_shapes(r: dict[str, Any], out: TextIO) -> None:
    """How many of the graph as loaded's tensors have a known shape at the run's inputs."""
    tensors = (r["views"].get("loaded") or {}).get("tensors") or {}
    known = sum(1 for t in tensors.values() if t[1] is not None)
    at = ", ".join(f"{safe(k)}={'x'.join(map(str, v))}" for k, v in r.get("inputs", {}).items())
    out.write(f"{'shapes':<10} {known:,} of {len(tensors):,} tensors sized at {at}\n")


def print_view(r: dict[str, Any], key: str, out: TextIO) -> None:
    """One view's summary: its nodes by op type, repeated blocks, layout and note."""
    w = out.write
    title = "as run" if key == "run" else "as loaded"
    for v in [r["views"].get(key)]:
        if not v:
            continue
        ops = Counter(n["op"] for n in v["nodes"] if n["op"] not in ("Input", "Output"))
        common = ", ".join(f"{safe(k)} {c}" for k, c in ops.most_common(5))
        blocks = v.get("blocks") or []
        rep = (
            f"; {len(blocks)} repeated blocks of {len(blocks[0]['nodes'])} nodes" if blocks else ""
        )
        w(f"{title:<10} {sum(ops.values())} nodes ({common}){rep}\n")
        layout = v.get("layout") or (v.get("collapsed") or {}).get("layout") or {}
        form = "in full" if v.get("layout") else "collapsed"
        how = "from the cache" if layout.get("seconds") is not None and v["layout_s"] < 0.05 else ""
        w(f"{'':<10} laid out {form} in {v['layout_s']:.2f} s {how}".rstrip() + "\n")
        if v.get("note"):
            w(f"{'':<10} {safe(v['note'])}\n")


def print_run(r: dict[str, Any], out: TextIO) -> None:
    """The graph as run, what fusion replaced and folded away, the provider."""
    w = out.write
    views = r["views"]
    print_view(r, "run", out)
    if r.get("as_run_error"):  # the graph as run drawn without what it lacks, or not at all
        said = "" if views.get("run") else "not shown: "
        w(f"as run     {said}{safe(r['as_run_error'])}\n")
    fused = {k: v for k, v in r.get("fused", {}).items() if v}
    run_ops = {n["name"]: n["op"] for n in (views.get("run") or {}).get("nodes", [])}
    if fused:
        w(f"fusion     {len(fused)} run node(s) replaced loaded nodes:\n")
        for name, origins in sorted(fused.items(), key=lambda kv: -len(kv[1]))[:SHOWN_FUSIONS]:
            kinds = Counter(_op_of(views["loaded"], o) for o in origins)
            made = ", ".join(
                f"{safe(k)} x{c}" if c > 1 else safe(k) for k, c in kinds.most_common()
            )
            op = safe(run_ops.get(name, "?"))
            w(f"{'':<10} {op} {safe(name)}: {len(origins)} nodes ({made})\n")
        if len(fused) > SHOWN_FUSIONS:
            w(f"{'':<10} ... {len(fused) - SHOWN_FUSIONS} more (--json lists them all)\n")
    if r.get("removed"):
        w(
            f"not run    {len(r['removed'])} loaded node(s) have no counterpart as run: folded "
            "into constants, removed, or rewritten under new tensor names (INT8's)\n"
        )
    if r.get("kept_fp32"):
        w(f"kept FP32  {len(r['kept_fp32'])} node(s) kept in FP32 for the accuracy target\n")
    if r.get("provider_used"):
        w(f"provider   {safe(r['provider_used'])}\n")


def _op_of(view: dict[str, Any], name: str) -> str:
    return next((n["op"] for n in view["nodes"] if n["name"] == name), "?")
