"""The Graph dock: the graph job (engine/run/graph_job.py, as `opscope graph`) through the
window's one runner for the model, config and inputs the window shows, when the dock is
in view and the model or its variant changes (on one thread, at low priority, beside
live timing);
the live profile's per-node figures painted on it; a node picked here picked in the op
table and on the roofline, and back; another run of the session to compare with; export
of the view (SVG, PNG) and of the overlay as Model Explorer node data."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QLabel,
    QMenu,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from engine.api import GraphRequest, ModelInfo, Notice, OpScopeError, OpStat, Progress
from widgets.graph_view import GraphView

CONCERN = "graph"
COMPARE = "graph-compare"  # another run's graph, for the change overlay
NO_MODEL = "load a model: its graph is laid out here, with the live profile on it"


class GraphDock(QWidget):
    def __init__(self, workbench: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.wb = workbench
        self.view = GraphView()
        self.status = QLabel(NO_MODEL)
        self.status.setMinimumWidth(1)  # long words never widen the window
        self.refresh_button = QPushButton("Refresh")
        self.refresh_button.setToolTip("Lay the graph out again for the config shown")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.compare = QComboBox()
        self.compare.setToolTip(
            "Another run of this session: the 'change' overlay colours "
            "each node by its time against that run's"
        )
        self.compare.addItem("compare with…", None)
        self.export_button = QToolButton()
        self.export_button.setText("Export")
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.export_button)
        menu.addAction("View as SVG or PNG…", self.export_image)
        menu.addAction("Overlay as Model Explorer node data…", self.export_explorer)
        self.export_button.setMenu(menu)
        # the view's row of controls, and one of words with this dock's buttons: the graph
        # gets the rest (and the window keeps to 1024 px)
        self.view.foot.addWidget(self.status, 1)
        for w in (self.compare, self.export_button, self.refresh_button, self.cancel_button):
            self.view.foot.addWidget(w)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(self.view, 1)
        self.model: str | None = None
        self.drawn: tuple[Any, ...] | None = None  # what the graph shown was laid out for
        self.wanted = False  # laid out once the dock comes into view
        self.visible = False  # the dock's tab is the one shown
        self.expand = False
        self.refresh_button.clicked.connect(lambda: self.lay_out(force=True))
        self.cancel_button.clicked.connect(lambda: self.wb.jobs.cancel(CONCERN))
        self.view.expand_requested.connect(self._expand)
        self.compare.activated.connect(self._compare_picked)

    @property
    def running(self) -> bool:
        return bool(self.wb.jobs.busy(CONCERN))

    def in_view(self) -> bool:
        """Whether the dock is shown (not a hidden tab, not closed): its dock's
        visibilityChanged says so (`shown`)."""
        return self.visible

    # triggers --------------------------------------------------------------------------
    def model_loaded(self, info: ModelInfo) -> None:
        """Another model: its graph (timing resumed re-announces the same model: the
        graph drawn stays)."""
        if info.path != self.model:
            self.model = info.path
            self.expand = False
            self.view.set_result(None)
            self.status.setText(f"{info.name}: its graph follows")
            self.lay_out()

    def variant_changed(self) -> None:
        """A config runs: its graph as run differs when the engine, precision, fusion,
        provider or shapes do."""
        if self._key() != self.drawn:
            self.lay_out()

    def _key(self) -> tuple[Any, ...]:
        load = self.wb.client.last_load
        c = self.wb.window.config_panel.config()
        inputs = self.wb.client.job_inputs()
        return (
            load[0] if load else None,
            c.engine,
            c.precision,
            c.fusion,
            c.provider,
            c.batch,
            sorted(inputs.shapes.items()),
            sorted(inputs.dims.items()),
        )

    def shown(self, visible: bool) -> None:
        self.visible = visible
        if visible:
            if self.wanted or self._key() != self.drawn:
                self.lay_out()
            self.refresh_runs()

    def lay_out(self, force: bool = False) -> None:
        """The graph job for what the window shows, now when the dock is in view (or
        `force`), else once it comes into view. Live timing goes on: the job runs on one
        thread below the engine's priority (pausing made a new run at every config change
        with the Graph tab open)."""
        load = self.wb.client.last_load
        if not load or self.running:
            return
        if not (force or self.in_view()):
            self.wanted = True
            return
        inputs = self.wb.client.job_inputs()
        request = GraphRequest(
            load[0],
            self.wb.window.config_panel.config(),
            dict(inputs.shapes),
            dict(inputs.dims),
            expand=self.expand,
            low_priority=True,
            **inputs.data_files(),
        )
        self.wanted = False
        self.drawn = self._key()
        self.refresh_button.setEnabled(False)
        self.cancel_button.setEnabled(True)
        self.status.setText("laying out the graph (one thread, at low priority)")
        self.wb.jobs.start(
            CONCERN,
            request,
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
            if isinstance(item, Progress) and item.stage in ("graph", "variant", "int8"):
                self.status.setText(f"graph: {item.message}")
            elif isinstance(item, Notice) and item.level in ("warning", "info"):
                self.status.setText(item.message)

    def _done(self, result: dict[str, Any]) -> None:
        try:
            self.view.set_result(result)
        except Exception as exc:  # an internal error: said in one line, not stuck
            import traceback

            traceback.print_exc()
            self.view.set_result(None)
            self._end(f"graph could not be drawn (internal error): {exc}", failed=True)
            return
        self.wb.window.op_table.set_node_memory(self.view.node_memory())
        views = result.get("views") or {}
        views = {k: v for k, v in views.items() if v}
        sizes = ", ".join(
            f"{len(v['nodes'])} nodes {'as run' if k == 'run' else 'as loaded'}"
            for k, v in views.items()
        )
        took = sum(v.get("layout_s", 0.0) for v in views.values())
        self._end(
            f"{sizes}; laid out in {took:.2f} s"
            + (f" on {result['provider_used']}" if result.get("provider_used") else "")
        )

    def _end(self, text: str, failed: bool = False) -> None:
        self.refresh_button.setEnabled(True)
        self.cancel_button.setEnabled(False)
        self.status.setText(text)
        if failed:
            self.drawn = None  # Refresh, or the next config, tries again

    # live figures and linking ----------------------------------------------------------
    def set_figures(self, ops: list[OpStat], roofs: Any) -> None:
        self.view.set_figures(ops, roofs)

    # comparing with another run ----------------------------------------------------------
    def refresh_runs(self) -> None:
        """The session's runs that recorded a profile, for the 'change' overlay."""
        from engine.api import SessionReader

        path = str(self.wb.recording.path)
        try:
            self.wb.recording.flush()
            reader = SessionReader.open(path)
        except (OSError, OpScopeError):
            return
        try:
            runs = [r for r in reader.runs() if reader.profiles(r.id)]
        finally:
            reader.close()
        current = self.compare.currentData()
        self.compare.blockSignals(True)
        self.compare.clear()
        self.compare.addItem("compare with…", None)
        for r in runs:
            cfg = r.config.label() if r.config is not None else "?"
            self.compare.addItem(f"run {r.id}: {cfg}", r.id)
        i = self.compare.findData(current)
        self.compare.setCurrentIndex(max(i, 0))
        self.compare.blockSignals(False)

    def _compare_picked(self, index: int) -> None:
        """Another run for the 'change' overlay. A run of another graph as run (FP32
        against INT8) is compared on the model as loaded: that run's graph is laid out
        too, for the loaded nodes each of its nodes replaced."""
        run_id = self.compare.itemData(index)
        if run_id is None:
            self.view.set_baseline(None)
            return
        from engine.api import SessionReader

        try:
            self.wb.recording.flush()
            reader = SessionReader.open(str(self.wb.recording.path))
            try:
                stats = [OpStat(**d) for d in reader.ops(int(run_id))]
                run = next(r for r in reader.runs() if r.id == int(run_id))
            finally:
                reader.close()
        except (OSError, OpScopeError, ValueError, StopIteration) as exc:
            self.status.setText(f"cannot read run {run_id}: {exc}")
            return
        name = f"run {run_id}"
        mine = self.view.result or {}
        same = (
            run.config is not None
            and run.model_path == mine.get("model")
            and all(
                getattr(run.config, k) == (mine.get("config") or {}).get(k)
                for k in ("engine", "precision", "fusion")
            )
        )
        self.view.overlay_combo.setCurrentText("change")
        if same or run.config is None or not run.model_path:
            self.view.set_baseline(stats, name, self.view.stand_in)
            return
        self.view.set_baseline(stats, name)  # by name until its graph is known
        self.view.view_combo.setCurrentText("as loaded")
        shapes = {k: tuple(v["shape"]) for k, v in run.inputs.items() if v.get("shape")}
        load = self.wb.client.last_load
        # the same model: its variant was built from the Inputs panel's data files (runs do
        # not record them), so it is taken from the cache rather than made again
        files = (
            self.wb.client.job_inputs().data_files() if load and load[0] == run.model_path else {}
        )
        request = GraphRequest(run.model_path, run.config, shapes, **files)
        self.status.setText(f"{name} ran another graph: reading it to compare node by node")
        self.wb.jobs.start(
            COMPARE,
            request,
            on_done=lambda r: self._baseline_graph(stats, name, r),
            on_failed=lambda why: self.status.setText(f"{name}'s graph failed: {why}"),
            on_cancelled=lambda: None,
        )

    def _baseline_graph(self, stats: list[OpStat], name: str, result: dict[str, Any]) -> None:
        from widgets.models.graph_scene import replaced_by

        self.view.set_baseline(stats, name, replaced_by(result))
        self.status.setText(
            f"compared with {name} on the model as loaded (its graph as run "
            "differs: each node through the node that replaced it)"
        )

    # export ----------------------------------------------------------------------------
    def export_image(self) -> None:
        if self.view.scene_ is None:
            self.status.setText("nothing to export yet")
            return
        path, _ = QFileDialog.getSaveFileName(
            self, "Export Graph View", "graph.svg", "SVG (*.svg);;PNG (*.png)"
        )
        if path:
            self.save_image(path)

    def save_image(self, path: str) -> None:
        """The view to `path` through a temporary file renamed over it (never half a file)."""
        import os
        from pathlib import Path

        target = Path(path)
        tmp = target.with_name(f".{target.name}.part{target.suffix}")
        try:
            self.view.render_image(str(tmp))
            os.replace(tmp, target)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            self.status.setText(f"cannot export {path}: {exc}")
            return
        self.status.setText(f"exported {path}")

    def export_explorer(self) -> None:
        if self.view.scene_ is None or self.view.result is None:
            self.status.setText("nothing to export yet")
            return
        path, _ = QFileDialog.getSaveFileName(
            self, "Export for Model Explorer", "opscope_overlay.json", "JSON (*.json)"
        )
        if path:
            self.save_explorer(path)

    def save_explorer(self, path: str) -> None:
        """The overlay shown, on the model file's nodes (what a teammate opens in Model
        Explorer): a fused node's figure on each node it replaced."""
        from engine.api import export_overlay

        result = self.view.result or {}
        overlay = self.view.overlay_combo.currentText()
        try:
            n = export_overlay(
                result["model"],
                self.view.explorer_values(),
                f"OpScope {overlay}",
                path,
                higher_is_worse=overlay != "GB/s",
            )
        except (OSError, OpScopeError, KeyError) as exc:
            self.status.setText(f"cannot export {path}: {exc}")
            return
        self.status.setText(
            f"exported the {overlay} overlay of {n} nodes for Model Explorer: {path}"
        )
