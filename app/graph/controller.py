"""The Graph room's controller: the graph job (engine/run/graph_job.py, as `opscope graph`)
for the desk's workload when the dock is in view and the model or its variant changes (on
one thread, beside live timing); the live profile's per-node figures
painted on it; a node picked here picked in the op table and on the roofline, and back;
another run of the session to compare with; export of the view (SVG, PNG) and of the
overlay as Model Explorer node data."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject

from app.desk import Desk, Figures
from app.graph.port import GraphViewPort
from engine.api import (
    GraphRequest,
    GraphSoFar,
    JobInputs,
    ModelInfo,
    Notice,
    OpScopeError,
    OpStat,
    Progress,
    SessionReader,
    Workload,
    export_overlay,
    run_label,
)

CONCERN = "graph"
COMPARE = "graph-compare"  # another run's graph, for the change overlay


class GraphController(QObject):
    def __init__(self, desk: Desk, view: GraphViewPort) -> None:
        super().__init__()
        self.desk, self.view = desk, view
        self.model: str | None = None
        self.drawn: tuple[Any, ...] | None = None  # what the graph shown was laid out for
        self.wanted = False  # laid out once the dock comes into view
        self.visible = False  # the dock's tab is the one shown
        self.expand = False
        self.drawn_so_far = ""  # what the running job has drawn so far, in words
        view.refresh_requested.connect(lambda: self.lay_out(force=True))
        view.cancel_requested.connect(lambda: desk.jobs.cancel(CONCERN))
        view.expand_requested.connect(self._expand)
        view.compare_picked.connect(self.compare_with)
        view.node_selected.connect(desk.pick_node)
        view.export_image_requested.connect(self.save_image)
        view.export_explorer_requested.connect(self.save_explorer)
        desk.model_loaded.connect(self.model_loaded)
        desk.variant_ready.connect(lambda _ev: self.variant_changed())
        desk.figures_changed.connect(self._figures)
        desk.node_shown.connect(view.select_node)

    @property
    def running(self) -> bool:
        return bool(self.desk.jobs.busy(CONCERN))

    # triggers --------------------------------------------------------------------------
    def model_loaded(self, info: ModelInfo) -> None:
        """Another model: its graph (timing resumed re-announces the same model: the
        graph drawn stays)."""
        if info.path != self.model:
            self.model = info.path
            self.expand = False
            self.view.set_result(None)
            self.view.set_status(f"{info.name}: its graph follows")
            self.lay_out()

    def variant_changed(self) -> None:
        """A config runs: its graph as run differs when the engine, precision, fusion,
        provider or shapes do."""
        if self._key() != self.drawn:
            self.lay_out()

    def _key(self) -> tuple[Any, ...] | None:
        w = self.desk.workload
        if w is None:
            return None
        c = w.config
        return (
            w.model, c.engine, c.precision, c.fusion, c.provider, c.batch,
            sorted(w.inputs.shapes.items()), sorted(w.inputs.dims.items()),
        )  # fmt: skip

    def shown(self, visible: bool) -> None:
        """The dock came into view (its visibilityChanged) or went out of it."""
        self.visible = visible
        if visible:
            if self.wanted or self._key() != self.drawn:
                self.lay_out()
            self.refresh_runs()

    def lay_out(self, force: bool = False) -> None:
        """The graph job for the workload, now when the dock is in view (or `force`), else
        once it comes into view. Live timing goes on: the job runs on one thread below the
        engine's priority (pausing made a new run at every config change with the Graph
        tab open)."""
        if self.desk.workload is None or self.running:
            return
        if not (force or self.visible):
            self.wanted = True
            return
        # running first: a job refused at once (no engine host) ends it within the call
        self.wanted = False
        self.drawn = self._key()
        self.drawn_so_far = ""
        self.view.set_running(True)
        self.view.set_status("laying out the graph (one thread, beside live timing)")
        self.desk.run_on_workload(
            CONCERN,
            lambda w: GraphRequest(w, expand=self.expand, low_priority=True),
            on_done=self._done,
            on_failed=lambda why: self._end(f"graph failed: {why}", failed=True),
            on_events=self._events,
            on_cancelled=lambda: self._end("graph cancelled", failed=True),
        )

    def _expand(self) -> None:
        self.expand = True
        self.lay_out(force=True)

    def _events(self, batch: list[Any]) -> None:
        for item in batch:
            if isinstance(item, GraphSoFar):
                self._so_far(item)
            elif isinstance(item, Progress) and item.stage in ("graph", "variant", "int8"):
                self.view.set_status(self.drawn_so_far + f"graph: {item.message}")
            elif isinstance(item, Notice) and item.level in ("warning", "info"):
                self.view.set_status(item.message)

    def _so_far(self, part: GraphSoFar) -> None:
        """The graph as far as the job has made it, drawn while it makes the rest (the
        view as loaded first: seconds, where the whole took a minute on a busy machine)."""
        try:
            self.view.set_result(part.result)
        except Exception:  # drawn whole at the end, or said then: never stuck here
            import traceback

            traceback.print_exc()
            return
        views = {k: v for k, v in (part.result.get("views") or {}).items() if v}
        self.drawn_so_far = f"{node_counts(views).split(' (')[0]} drawn; "
        self.view.set_status(f"{self.drawn_so_far}making {', '.join(part.pending)}")

    def _done(self, result: dict[str, Any]) -> None:
        try:
            self.view.set_result(result)
        except Exception as exc:  # an internal error: said in one line, not stuck
            import traceback

            traceback.print_exc()
            self.view.set_result(None)
            self._end(f"graph could not be drawn (internal error): {exc}", failed=True)
            return
        self.desk.show_node_memory(self.view.node_memory())
        views = {k: v for k, v in (result.get("views") or {}).items() if v}
        took = sum(v.get("layout_s", 0.0) for v in views.values())
        # drawn as run without what its profiled run would have told (stopped at its time
        # limit): said first, where a narrow dock still shows it (the rest in the tooltip)
        lacking = result.get("as_run_error") if views.get("run") else None
        self._end(
            (f"as run: {lacking}; " if lacking else "")
            + f"{node_counts(views)}; laid out in {took:.2f} s"
            + (f" on {result['provider_used']}" if result.get("provider_used") else "")
        )

    def _end(self, text: str, failed: bool = False) -> None:
        self.drawn_so_far = ""
        self.view.set_running(False)
        self.view.set_status(text)
        if failed:
            self.drawn = None  # Refresh, or the next config, tries again

    def _figures(self, figures: Figures) -> None:
        self.view.set_figures(figures.ops, figures.roofs)

    # comparing with another run ----------------------------------------------------------
    def _read_session(self) -> SessionReader | None:
        try:
            self.desk.recording.flush()
            return SessionReader.open(self.desk.session_path)
        except (OSError, OpScopeError):
            return None

    def refresh_runs(self) -> None:
        """The session's runs that recorded a profile, for the 'change' overlay."""
        reader = self._read_session()
        if reader is None:
            return
        try:
            runs = [r for r in reader.runs() if reader.profiles(r.id)]
        finally:
            reader.close()
        self.view.set_compare_runs([(run_label(r), r.id) for r in runs])  # as Compare's

    def compare_with(self, run_id: object) -> None:
        """Another run for the 'change' overlay. A run of another graph as run (FP32
        against INT8) is compared on the model as loaded: that run's graph is laid out
        too, for the loaded nodes each of its nodes replaced."""
        if run_id is None:
            self.view.set_baseline(None)
            return
        try:
            self.desk.recording.flush()
            reader = SessionReader.open(self.desk.session_path)
            try:
                stats = reader.ops(int(str(run_id)))
                run = next(r for r in reader.runs() if r.id == int(str(run_id)))
            finally:
                reader.close()
        except (OSError, OpScopeError, ValueError, StopIteration) as exc:
            self.view.set_status(f"cannot read run {run_id}: {exc}")
            return
        name = f"run {run_id}"
        mine = self.view.result() or {}
        same = (
            run.config is not None
            and run.model_path == mine.get("model")
            and all(
                getattr(run.config, k) == (mine.get("config") or {}).get(k)
                for k in ("engine", "precision", "fusion")
            )
        )
        if same or run.config is None or not run.model_path:
            self.view.show_change_overlay(on_loaded=False)
            self.view.set_baseline(stats, name, self.view.stand_in())
            return
        self.view.show_change_overlay(on_loaded=True)
        self.view.set_baseline(stats, name)  # by name until its graph is known
        shapes = {k: tuple(v["shape"]) for k, v in run.inputs.items() if v.get("shape")}
        current = self.desk.workload
        # the same model: its variant was built from the Inputs panel's data files (runs do
        # not record them), so it is taken from the cache rather than made again
        inputs = (
            dataclasses.replace(current.inputs, shapes=shapes, dims={})
            if current is not None and current.model == run.model_path
            else JobInputs(shapes=shapes)
        )
        request = GraphRequest(Workload(run.model_path, run.config, inputs))
        self.view.set_status(f"{name} ran another graph: reading it to compare node by node")
        self.desk.jobs.start(
            COMPARE,
            request,
            on_done=lambda r: self._baseline_graph(stats, name, r),
            on_failed=lambda why: self.view.set_status(f"{name}'s graph failed: {why}"),
        )

    def _baseline_graph(self, stats: list[OpStat], name: str, result: dict[str, Any]) -> None:
        from widgets.models.graph_scene import replaced_by

        self.view.set_baseline(stats, name, replaced_by(result))
        self.view.set_status(
            f"compared with {name} on the model as loaded (its graph as run "
            "differs: each node through the node that replaced it)"
        )

    # export ----------------------------------------------------------------------------
    def save_image(self, path: str) -> None:
        """The view to `path` through a temporary file renamed over it (never half a file)."""
        if not self.view.has_scene():
            self.view.set_status("nothing to export yet")
            return
        target = Path(path)
        tmp = target.with_name(f".{target.name}.part{target.suffix}")
        try:
            self.view.render_image(str(tmp))
            os.replace(tmp, target)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            self.view.set_status(f"cannot export {path}: {exc}")
            return
        self.view.set_status(f"exported {path}")

    def save_explorer(self, path: str) -> None:
        """The overlay shown, on the model file's nodes (what a teammate opens in Model
        Explorer): a fused node's figure on each node it replaced."""
        result = self.view.result()
        if not self.view.has_scene() or result is None:
            self.view.set_status("nothing to export yet")
            return
        overlay = self.view.overlay()
        try:
            n = export_overlay(
                result["model"],
                self.view.explorer_values(),
                f"OpScope {overlay}",
                path,
                higher_is_worse=overlay != "GB/s",
            )
        except (OSError, OpScopeError, KeyError) as exc:
            self.view.set_status(f"cannot export {path}: {exc}")
            return
        self.view.set_status(
            f"exported the {overlay} overlay of {n} nodes for Model Explorer: {path}"
        )


def node_counts(views: dict[str, Any]) -> str:
    """The graph's node counts as the config line counts them (the model's own nodes, at
    the top level), and what the view draws besides: input and output boxes, the nodes
    inside If/Loop/Scan bodies."""
    parts, boxes, inner = [], 0, 0
    for key in ("loaded", "run"):
        nodes = (views.get(key) or {}).get("nodes")
        if nodes is None:
            continue
        ops = [n for n in nodes if n["op"] not in ("Input", "Output")]
        top = sum(1 for n in ops if not n.get("parent"))
        parts.append(f"{top} nodes {'as run' if key == 'run' else 'as loaded'}")
        boxes, inner = max(boxes, len(nodes) - len(ops)), max(inner, len(ops) - top)
    besides = [f"{boxes} input/output boxes"] if boxes else []
    besides += [f"{inner} nodes inside bodies"] if inner else []
    drawn = f" (as the config counts them; drawn besides: {', '.join(besides)})" if besides else ""
    return " → ".join(parts) + drawn
